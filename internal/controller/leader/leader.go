// Package leader runs the controller loop on one replica at a time: a
// Lease held with client-go's leader election, handed over to the
// replicas of a --shards group when they appear.
package leader

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

// Election configures running the loop on one replica at a time.
type Election struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
}

// StopGrace is how long a sync in flight when a leader's loop stops may go
// on before it is cancelled. A leader stepping down for the replicas of a
// rollout to --shards still holds the Lease, and releases it only once its
// loop has stopped: cancelling the sync at once would abandon a hook call
// the hook goes on with, while the next owner, given the Lease, calls the
// hook about the same parent. A leader that lost its Lease is told so by
// client-go within RenewDeadline of the retry after its last renewal, and
// another replica may take the Lease LeaseDuration after that renewal:
// half of what remains between the two is the grace, so that even then
// no sync of this replica's outlives its Lease.
func (le Election) StopGrace() time.Duration {
	return max(0, (le.LeaseDuration-le.RenewDeadline-le.RetryPeriod)/2)
}

// Run runs run while this replica holds the Lease; API
// serving goes on in every replica regardless. Losing the Lease stops the
// loop (run's context is cancelled) and the replica tries to get it back.
//
// Replicas run with --shards under the same Lease name (a rollout from
// --leader-elect to --shards) would sync the parents of their shards
// beside this loop: the leader runs the loop only while none of them is
// live, and steps down when one joins. The members, for their part, take
// no shard while this Lease is held (internal/shard).
func Run(ctx context.Context, kube kubernetes.Interface, le Election, run func(context.Context)) error {
	host, _ := os.Hostname()
	identity := fmt.Sprintf("%s_%d_%d", host, os.Getpid(), time.Now().UnixNano())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("can't create the leader election lock: %w", err)
	}
	members := shard.NewMembers(le.Namespace, le.Name, le.LeaseDuration, kube.CoordinationV1(), nil)
	for ctx.Err() == nil {
		if !awaitNoMembers(ctx, members, le) {
			return nil
		}
		term(ctx, lock, le, identity, func(ctx context.Context) {
			lead(ctx, members, le, identity, run)
		})
	}
	return nil
}

// term is one attempt at leading: it runs lead while this replica holds
// the Lease, and releases the Lease only once lead has returned, so that
// no sync of this replica's is still running when another replica may
// take the Lease (client-go releases it as soon as its context ends, with
// the loop maybe still stopping). The Lease is renewed meanwhile.
func term(ctx context.Context, lock resourcelock.Interface, le Election, identity string, lead func(context.Context)) {
	logger := klog.FromContext(ctx)
	electing, release := context.WithCancel(ctx)
	defer release()
	leading := make(chan context.Context, 1)
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		leaderelection.RunOrDie(electing, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            le.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { leading <- ctx },
				OnStoppedLeading: func() {
					logger.Info("Not leading: the controller loop is stopped", "identity", identity)
				},
			},
		})
	}()
	select {
	case leadCtx := <-leading:
		lead(leadCtx)
	case <-elected:
	}
	release()
	<-elected
}

// lead runs the loop for as long as this replica leads and no shard
// member of its group is live. It checks for members once it holds the
// Lease, before the loop starts: a member that wrote its membership before
// that check is seen by it, and one that writes it after reads the Lease
// held, and waits.
func lead(ctx context.Context, members *shard.Members, le Election, identity string, run func(context.Context)) {
	logger := klog.FromContext(ctx).WithValues("identity", identity)
	if live, err := members.Live(ctx); err != nil || len(live) > 0 {
		if err != nil {
			logger.Error(err, "Can't tell whether replicas run with --shards: not starting the controller loop; trying again")
		} else {
			logger.Info("Replicas of the shard group of this Lease's name are live: not starting the controller loop, giving the Lease up", "members", live)
		}
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		ticker := time.NewTicker(le.RetryPeriod)
		defer ticker.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-ticker.C:
			}
			live, err := members.Live(runCtx)
			if err != nil {
				// The members guard it too: they take no shard while
				// this Lease is held.
				logger.V(2).Info("Can't read the shard group's members; leading on", "err", err)
				continue
			}
			if len(live) > 0 {
				logger.Info("Replicas with --shards joined the group of this Lease's name: stepping down, the Lease is released once the controller loop has stopped", "members", live)
				stop()
				return
			}
		}
	}()
	logger.Info("Leading: starting the controller loop")
	run(runCtx)
}

// awaitNoMembers waits until no shard member of the group is live, and
// tells whether ctx is still going. A failed read is waited out too.
func awaitNoMembers(ctx context.Context, members *shard.Members, le Election) bool {
	logger := klog.FromContext(ctx)
	var last string
	for ctx.Err() == nil {
		live, err := members.Live(ctx)
		if err == nil && len(live) == 0 {
			return true
		}
		msg := fmt.Sprint(live, err)
		if msg != last {
			last = msg
			logger.Info("Not trying to lead: replicas with --shards run the loop under this Lease's name, or they can't be read", "lease", le.Namespace+"/"+le.Name, "members", live, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(le.RetryPeriod):
		}
	}
	return false
}
