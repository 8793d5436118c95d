package controller

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/pkg/rollout"
)

// With --shards, which revision syncs a parent is still the pure function
// of status.rollout (rollout.Plan) on every replica, and each replica
// syncs the parents of its shards with the loop of their revision. What
// one replica can't see is how the other replicas' syncs ended: each
// reports its own parents' part of the step's gate in
// status.rollout.replicas, and one replica, the holder of the shard of the
// controller's key (driverKey), drives: it begins, gates, passes, pauses
// and rolls back steps as a lone replica does, from the sum of the reports
// of every shard's holder (rollout.Gather). Its writes end with its hold of
// that shard (Begin's context), and whoever holds it next takes the
// rollout on from its status, so a failover or a shard move resumes it
// where it was, and no parent is synced by two revisions: a parent has one
// holder, which syncs it with the revision the stored status gives it.

// shardGroup is what a rollout needs of the group of --shards
// (pkg/shard.Member): the parents' shards, this replica's identity and
// shards, and who holds every shard.
type shardGroup interface {
	syncgate.ParentShards
	Identity() string
	Owned() []int
	Holders() []string
}

// rolloutShards is a rollout's part in the group of --shards.
type rolloutShards struct {
	group     shardGroup
	driverKey string
	// driving says whether this replica drove at its last tick.
	driving bool
	// tallied is the report the driver's gate made of its own parents in
	// this tick, which its report after the gate sends when the step is
	// still the one it was made of: one pass over the parents a tick, not
	// two.
	tallied *v1alpha1.RolloutReplicaReport
}

// driverKey is the key whose shard's holder drives the rollout of the
// controller of key.
func driverKey(key string) string { return "rollout/" + key }

// stored is the controller's rollout status as this replica's informer
// has it, nil when the controller is gone or has none.
func (r *rolloutRun) stored() *v1alpha1.RolloutStatus {
	obj, err := r.k.get(r.m, r.owner.GetName())
	if err != nil || obj.GetUID() != r.owner.GetUID() {
		return nil
	}
	return r.k.revisions(obj).status
}

// adopt takes the rollout's status as its driver wrote it: this replica
// moves the parents of its shards as it says, and a resumed step's parents
// are synced again for its gate, as the driver's own are (resume).
func (r *rolloutRun) adopt() {
	st := r.stored()
	r.mu.Lock()
	if st == nil || st.UpdateRevision != r.status.UpdateRevision {
		// A new revision restarts the controller's loops.
		r.mu.Unlock()
		return
	}
	was := r.status
	r.status = *st.DeepCopy()
	r.status.Replicas = nil
	before := r.plan.Load()
	resumed := st.Phase == v1alpha1.RolloutProgressing && (was.Phase == v1alpha1.RolloutPaused || was.Phase == v1alpha1.RolloutRolledBack)
	if resumed {
		r.results = map[types.UID]syncResult{}
		before = &rollout.Plan{None: true}
	}
	err := r.replan()
	r.mu.Unlock()
	if err != nil {
		klog.Background().Error(err, "Can't follow the controller's rollout", "controller", r.key)
		return
	}
	r.enqueueMoved(before)
	if st.Phase == v1alpha1.RolloutComplete {
		// The manager stops the previous revision's loop and this driver.
		r.m.queue.Add(r.key)
	}
}

// ownReport is this replica's report of the step under way; under mu.
func (r *rolloutRun) ownReport(ctx context.Context) *v1alpha1.RolloutReplicaReport {
	t := r.look(ctx)
	st := &r.status
	rep := &v1alpha1.RolloutReplicaReport{
		Replica: r.shards.group.Identity(), UpdateRevision: st.UpdateRevision, Step: st.Step, StepStartTime: st.StepStartTime.DeepCopy(),
		UpdatedParents: t.Updated, HealthyParents: t.Healthy, SyncFailures: t.SyncFailures,
		FailingParents: t.Failing[:min(len(t.Failing), maxFailingNamed)],
	}
	for _, s := range r.shards.group.Owned() {
		rep.Shards = append(rep.Shards, int32(s))
	}
	return rep
}

// report writes this replica's report of the step under way when the
// stored one is not it (changed, or dropped by a replica that did not
// know this one yet): only a step under way is gated.
func (r *rolloutRun) report(ctx context.Context) {
	r.mu.Lock()
	rep, owner := r.shards.tallied, r.owner
	r.shards.tallied = nil
	if r.status.Phase != v1alpha1.RolloutProgressing || r.status.StepStartTime == nil {
		r.mu.Unlock()
		return
	}
	if rep == nil || !sameStep(rep, &r.status) {
		rep = r.ownReport(ctx)
	}
	r.mu.Unlock()
	if st := r.stored(); st != nil {
		for i := range st.Replicas {
			if equality.Semantic.DeepEqual(&st.Replicas[i], rep) {
				return
			}
		}
	}
	holders := r.shards.group.Holders()
	err := r.store.mutate(ctx, owner.GetName(), owner.GetUID(), func(t *trackedStatus) {
		if t.Rollout != nil && t.Rollout.UpdateRevision == rep.UpdateRevision {
			t.Rollout.Replicas = rollout.Merge(t.Rollout.Replicas, rep, holders)
		}
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't report on the controller's rollout", "err", err)
	}
}

// tally is the gate's view of every parent the step moved: this replica's
// own, with the other replicas' reports of theirs with --shards; under mu.
func (r *rolloutRun) tally(ctx context.Context) rollout.Tally {
	if r.shards == nil {
		return r.look(ctx)
	}
	var reports []v1alpha1.RolloutReplicaReport
	if st := r.stored(); st != nil {
		reports = st.Replicas
	}
	holders := r.shards.group.Holders()
	r.shards.tallied = r.ownReport(ctx)
	return rollout.Gather(&r.status, holders, rollout.Merge(reports, r.shards.tallied, holders))
}

// sameStep tells whether rep reports on the step under way in st.
func sameStep(rep *v1alpha1.RolloutReplicaReport, st *v1alpha1.RolloutStatus) bool {
	return rep.UpdateRevision == st.UpdateRevision && rep.Step == st.Step &&
		rep.StepStartTime.Equal(st.StepStartTime)
}

// withReports is the driver's status to write over stored, keeping the
// replicas' reports stored, with its own as it is now.
func (r *rolloutRun) withReports(status, stored *v1alpha1.RolloutStatus) *v1alpha1.RolloutStatus {
	if r.shards == nil {
		return status
	}
	status = status.DeepCopy()
	status.Driver = r.shards.group.Identity()
	if stored != nil && stored.UpdateRevision == status.UpdateRevision {
		status.Replicas = slices.Clone(stored.Replicas)
	}
	return status
}
