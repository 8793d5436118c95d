package syncgate

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

// ownedKeys is a ParentShards whose share the test sets.
type ownedKeys struct {
	mu    sync.Mutex
	owned map[string]bool
	begun int
}

func (o *ownedKeys) Owns(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owned[key]
}

func (o *ownedKeys) Begin(ctx context.Context, key string) (context.Context, func(), bool) {
	if !o.Owns(key) {
		return nil, nil, false
	}
	o.mu.Lock()
	o.begun++
	o.mu.Unlock()
	return ctx, func() {}, true
}

func (o *ownedKeys) OnGained(func(func(string) bool)) {}

func (o *ownedKeys) set(key string, owned bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owned[key] = owned
}

// TestAParentQueueTakesOnlyThisReplicasParents: parents of other replicas'
// shards are never queued, and a parent queued before its shard was lost
// is dropped when a worker takes it, without a sync.
func TestAParentQueueTakesOnlyThisReplicasParents(t *testing.T) {
	shards := &ownedKeys{owned: map[string]bool{"ns/mine": true, "ns/lost": true}}
	q := ShardQueue(workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()), shards)
	defer q.ShutDown()
	q.Add("ns/theirs")
	q.AddRateLimited("ns/theirs")
	q.Add("ns/lost")
	q.Add("ns/mine")
	if got := q.Len(); got != 2 {
		t.Fatalf("queue holds %d parents, want 2: another replica's parent was queued", got)
	}
	shards.set("ns/lost", false)
	var synced []string
	for q.Len() > 0 {
		key, _ := q.Get()
		if _, done, ok := Admit(context.Background(), shards, q, key); ok {
			synced = append(synced, key)
			done()
		}
		q.Done(key)
	}
	if len(synced) != 1 || synced[0] != "ns/mine" {
		t.Errorf("synced %v, want only ns/mine: a parent of a lost shard was synced", synced)
	}
}
