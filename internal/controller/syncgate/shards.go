package syncgate

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// ParentShards is this replica's share of every controller's parents when
// replicas divide them (internal/shard's Member); nil syncs them all. It is the
// one seam every kind of controller goes through: its parent queue drops
// the parents of other replicas' shards (ShardQueue), and its worker
// syncs a parent only inside Begin and done (Admit), so that a shard given
// up is released once its syncs in flight end.
type ParentShards interface {
	// Owns tells whether this replica syncs the parent of key now.
	Owns(key string) bool
	// Begin admits a sync of the parent of key when this replica owns
	// it, with a context that ends when the replica stops owning it;
	// done ends the sync.
	Begin(ctx context.Context, key string) (syncCtx context.Context, done func(), ok bool)
	// OnGained calls f when this replica gains shards, with what tells
	// whether a key is in one of them.
	OnGained(f func(gained func(key string) bool))
}

// ShardQueue is q taking only the parents of this replica's shards; q
// itself when shards is nil (every parent is this replica's).
func ShardQueue(q workqueue.TypedRateLimitingInterface[string], shards ParentShards) workqueue.TypedRateLimitingInterface[string] {
	if shards == nil {
		return q
	}
	return shardQueue{TypedRateLimitingInterface: q, shards: shards}
}

// shardQueue is a parent queue that takes only this replica's parents.
// Watching every parent and syncing a share costs each replica the memory
// of every object (one informer per resource, shared by all controllers)
// but no relabelling writes and no restart of informers when shards move:
// a gained shard's parents are in the cache already and queued at once.
type shardQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	shards ParentShards
}

func (q shardQueue) Add(key string) {
	if q.shards.Owns(key) {
		q.TypedRateLimitingInterface.Add(key)
	}
}

func (q shardQueue) AddAfter(key string, d time.Duration) {
	if q.shards.Owns(key) {
		q.TypedRateLimitingInterface.AddAfter(key, d)
	}
}

func (q shardQueue) AddRateLimited(key string) {
	if q.shards.Owns(key) {
		q.TypedRateLimitingInterface.AddRateLimited(key)
	}
}

// Admit is where a worker asks whether it may sync the parent of key:
// a parent queued before its shard was lost is dropped here (forgotten,
// so that its backoff does not carry over should the shard come back).
func Admit(ctx context.Context, shards ParentShards, queue workqueue.TypedRateLimitingInterface[string], key string) (syncCtx context.Context, done func(), ok bool) {
	if shards == nil {
		return ctx, func() {}, true
	}
	syncCtx, done, ok = shards.Begin(ctx, key)
	if !ok {
		queue.Forget(key)
	}
	return syncCtx, done, ok
}
