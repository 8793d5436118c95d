// Package syncgate admits the syncs of parents: which replica syncs a
// parent now (every one, the leader, or the owner of the parent's shard),
// and one sync of a parent at a time on this replica, whether the loop's
// worker or a live /sync runs it.
package syncgate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Gate is where the controller loop's workers and a live /sync take turns
// on a parent, so that one parent is never synced twice at once: on this
// replica, both hold the parent's turn for the whole sync; across
// replicas, a live /sync runs only on the replica whose loop syncs the
// parent now (the leader, or the owner of the parent's shard), inside the
// same admission as the loop's syncs, and is refused elsewhere. A replica
// that runs no loop admits every /sync: nothing here syncs beside it.
type Gate struct {
	mu sync.Mutex
	// turns are the parents being synced, each with what is closed when
	// its sync ends.
	turns map[string]chan struct{}
	// live counts the live syncs waiting for each parent's turn, and
	// yielded is closed, per parent, when that count falls or one of them
	// takes the turn: a loop's sync lets a waiting live sync go first.
	live    map[string]int
	yielded map[string]chan struct{}
	// mode is how this replica's loop runs, known before serving.
	mode gateMode
	// shards is this replica's share with --shards, once it has joined
	// its group.
	shards ParentShards
	// leading is true during a leadership term of this replica with
	// --leader-elect (Lead); inTerm cancels each live sync admitted in it
	// when the term ends, and termIdle is signalled when the last one
	// leaves. (The term's context itself is not kept: it belongs to Lead.)
	leading  bool
	inTerm   map[uint64]context.CancelCauseFunc
	nextSync uint64
	termIdle *sync.Cond
}

// errStoppedLeading ends the live syncs of a leadership term that ended.
var errStoppedLeading = errors.New("this replica stopped leading")

type gateMode int

const (
	// gateLocal: no loop on this replica, or a loop for every parent.
	gateLocal gateMode = iota
	gateLeader
	gateShards
)

// NewGate returns the Gate of a replica that runs no loop, or the loop for
// every parent; LeaderElected and Sharded set the other modes.
func NewGate() *Gate {
	g := &Gate{turns: map[string]chan struct{}{}, live: map[string]int{}, yielded: map[string]chan struct{}{}, inTerm: map[uint64]context.CancelCauseFunc{}}
	g.termIdle = sync.NewCond(&g.mu)
	return g
}

// LeaderElected makes live syncs run only while this replica leads (Lead).
// Call it before serving.
func (g *Gate) LeaderElected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = gateLeader
}

// Sharded makes live syncs run only for the parents of this replica's
// shards, admitted as the loop's syncs are: none while shards is nil (the
// replica has not joined its group yet). Call it before serving, and again
// once the replica has joined.
func (g *Gate) Sharded(shards ParentShards) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode, g.shards = gateShards, shards
}

// Lead runs run as the loop of one leadership term: live syncs are
// admitted during it, end with it, and Lead returns only once they have
// ended, so that the Lease is not released under one.
func (g *Gate) Lead(ctx context.Context, run func(context.Context)) {
	g.mu.Lock()
	g.leading = true
	g.mu.Unlock()
	// The term ends when ctx does, and its live syncs with it.
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.leading = false
		for _, cancel := range g.inTerm {
			cancel(errStoppedLeading)
		}
	})
	defer func() {
		stop()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.leading = false
		for len(g.inTerm) > 0 {
			g.termIdle.Wait()
		}
	}()
	run(ctx)
}

// turnKey names a parent of gr for the turns: a queue key and the resource.
func turnKey(gr schema.GroupResource, key string) string { return gr.String() + "/" + key }

// take waits for the parent's turn and returns what gives it back; an
// error when ctx ends first. A live sync (live) goes before the loop's:
// a parent the loop syncs again and again (its own writes, a busy hook)
// would otherwise take the turn back each time it is given, since every
// waiter wakes when it is, and a live /sync could wait past its
// request's deadline.
func (g *Gate) take(ctx context.Context, turn string, live bool) (func(), error) {
	if live {
		g.mu.Lock()
		g.live[turn]++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if g.live[turn]--; g.live[turn] == 0 {
				delete(g.live, turn)
			}
			g.yield(turn)
			g.mu.Unlock()
		}()
	}
	for {
		g.mu.Lock()
		busy, taken := g.turns[turn]
		if !taken && (live || g.live[turn] == 0) {
			free := make(chan struct{})
			g.turns[turn] = free
			if live {
				g.yield(turn)
			}
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.turns, turn)
				g.mu.Unlock()
				close(free)
			}, nil
		}
		if !taken {
			// Free, but a live sync waits for it: after it.
			if busy = g.yielded[turn]; busy == nil {
				busy = make(chan struct{})
				g.yielded[turn] = busy
			}
		}
		g.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// yield wakes the loop's syncs that let a live sync of turn go first;
// under mu.
func (g *Gate) yield(turn string) {
	if ch, ok := g.yielded[turn]; ok {
		close(ch)
		delete(g.yielded, turn)
	}
}

// AdmitLive admits a live /sync of the parent namespace/name of gr: it
// waits for a sync of the parent running on this replica to end, and
// returns the context the sync runs in and what ends it. A replica whose
// loop does not sync the parent now refuses it with 503
// ServiceUnavailable, saying why.
func (g *Gate) AdmitLive(ctx context.Context, gr schema.GroupResource, key string) (context.Context, func(), error) {
	syncCtx, leave, err := g.admitReplica(ctx, gr, key)
	if err != nil {
		return nil, nil, err
	}
	give, err := g.take(syncCtx, turnKey(gr, key), true)
	if err != nil {
		leave()
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("can't sync %s %s: %v", gr, key, context.Cause(syncCtx)))
	}
	return syncCtx, func() { give(); leave() }, nil
}

// admitReplica tells whether this replica's loop syncs the parent now,
// and admits a live sync of it as the loop's own.
func (g *Gate) admitReplica(ctx context.Context, gr schema.GroupResource, key string) (context.Context, func(), error) {
	const elsewhere = "; a live sync runs on the replica that syncs the parent in its controller loop, and this request reached another: " +
		"send it again (it may reach that replica), or change the parent (an annotation will do) to have the loop sync it now; ?dryRun=All previews on any replica"
	g.mu.Lock()
	mode, shards := g.mode, g.shards
	g.mu.Unlock()
	switch mode {
	case gateShards:
		var syncCtx context.Context
		var done func()
		ok := false
		if shards != nil {
			syncCtx, done, ok = shards.Begin(ctx, key)
		}
		if !ok {
			return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("this replica does not own the shard of %s %s (--shards)%s", gr, key, elsewhere))
		}
		return syncCtx, done, nil
	case gateLeader:
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.leading {
			return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("this replica is not the leader that syncs %s %s (--leader-elect)%s", gr, key, elsewhere))
		}
		id := g.nextSync
		g.nextSync++
		syncCtx, cancel := context.WithCancelCause(ctx)
		g.inTerm[id] = cancel
		return syncCtx, func() {
			cancel(nil)
			g.mu.Lock()
			defer g.mu.Unlock()
			delete(g.inTerm, id)
			if len(g.inTerm) == 0 {
				g.termIdle.Broadcast()
			}
		}, nil
	}
	return ctx, func() {}, nil
}

// Turn is where the loop's worker takes the parent's turn for its sync,
// admitted already (Admit): it waits for a live sync of the parent to
// end. A nil Gate has no turns to take.
func (g *Gate) Turn(ctx context.Context, gr schema.GroupResource, key string) (func(), error) {
	if g == nil {
		return func() {}, nil
	}
	return g.take(ctx, turnKey(gr, key), false)
}
