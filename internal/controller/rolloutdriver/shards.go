package rolloutdriver

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// With --shards, which revision syncs a parent is still the pure function
// of status.rollout (rollout.Plan) on every replica, and each replica
// syncs the parents of its shards with the loop of their revision. What
// one replica can't see is how the other replicas' syncs ended: each
// reports its own parents' part of the step's gate in
// status.rollout.replicas, and one replica, the holder of the shard of the
// controller's key (DriverKey), drives: it feeds the step function the sum
// of the reports of every shard's holder (rollout.Gather). Its writes end
// with its hold of that shard (Begin's context), and whoever holds it next
// takes the rollout on from its status, so a failover or a shard move
// resumes it where it was, and no parent is synced by two revisions: a
// parent has one holder, which syncs it with the revision the stored
// status gives it. A replica reports only once its informers have listed:
// a report of an empty view would pass a step (R1).

// ShardGroup is what a rollout needs of the group of --shards
// (internal/shard.Member): the parents' shards, this replica's identity and
// shards, and who holds every shard.
type ShardGroup interface {
	syncgate.ParentShards
	// Epoch tells this replica's holds of the shard of key apart (0 when
	// it does not own it): a result of the update revision's sync counts
	// only under the hold it was made in, as another replica may have
	// synced the parent while it held the shard in between.
	Epoch(key string) uint64
	Identity() string
	Owned() []int
	Holders() []string
}

// shardsState is a rollout's part in the group of --shards.
type shardsState struct {
	group     ShardGroup
	driverKey string
	// driving says whether this replica drove at its last tick.
	driving bool
	// tallied is the report the driver's gate made of its own parents in
	// this tick, which its report after the gate sends when the step is
	// still the one it was made of: one pass over the parents a tick, not
	// two.
	tallied *v1alpha1.RolloutReplicaReport
}

// DriverKey is the key whose shard's holder drives the rollout of the
// controller of key.
func DriverKey(key string) string { return "rollout/" + key }

// adopt takes the rollout's status as its driver wrote it, as this
// replica's informer shows it.
func (r *Driver) adopt() {
	r.adoptStatus(r.cfg.Controller.Stored())
}

// adoptStatus takes the rollout's status st as its driver wrote it: this
// replica moves the parents of its shards as it says, and a resumed step's
// parents are synced again for its gate, as the driver's own are.
func (r *Driver) adoptStatus(st *v1alpha1.RolloutStatus) {
	r.mu.Lock()
	if st == nil || st.UpdateRevision != r.status.UpdateRevision {
		// A new revision restarts the controller's loops.
		r.mu.Unlock()
		return
	}
	was := r.status
	r.status = *st.DeepCopy()
	rollout.Upgrade(&r.status, &r.spec)
	// The next decision is written whatever this replica wrote before.
	r.written = nil
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
		klog.Background().Error(err, "Can't follow the controller's rollout", "controller", r.cfg.Key)
		return
	}
	r.enqueueMoved(before)
	if st.Phase == v1alpha1.RolloutComplete {
		r.cfg.Controller.Done()
	}
}

// ownReport is this replica's report of the step under way in st.
func (r *Driver) ownReport(ctx context.Context, st *v1alpha1.RolloutStatus) *v1alpha1.RolloutReplicaReport {
	t := r.look(ctx)
	rep := &v1alpha1.RolloutReplicaReport{
		Replica: r.shards.group.Identity(), UpdateRevision: st.UpdateRevision, Step: st.Step, StepStartTime: st.StepStartTime.DeepCopy(),
		UpdatedParents: t.Updated, HealthyParents: t.Healthy, SyncFailures: t.SyncFailures,
		FailingParents: t.Failing[:min(len(t.Failing), rollout.MaxFailingNamed)],
	}
	for _, s := range r.shards.group.Owned() {
		rep.Shards = append(rep.Shards, int32(s))
	}
	return rep
}

// report writes this replica's report of the step under way when the
// stored one is not it (changed, or dropped by a replica that did not
// know this one yet): only a step under way is gated, and only a view
// that has listed is reported on.
func (r *Driver) report(ctx context.Context) {
	rep := r.shards.tallied
	r.shards.tallied = nil
	r.mu.Lock()
	st := r.status.DeepCopy()
	r.mu.Unlock()
	if st.Phase != v1alpha1.RolloutProgressing || st.StepStartTime == nil || !r.cfg.Update.HasSynced() || !r.cfg.Previous.HasSynced() {
		return
	}
	if rep == nil || !sameStep(rep, st) {
		rep = r.ownReport(ctx, st)
	}
	if stored := r.cfg.Controller.Stored(); stored != nil {
		for i := range stored.Replicas {
			if equality.Semantic.DeepEqual(&stored.Replicas[i], rep) {
				return
			}
		}
	}
	holders := r.shards.group.Holders()
	err := r.cfg.Controller.WriteRollout(ctx, func(stored *v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error) {
		if stored != nil && stored.UpdateRevision == rep.UpdateRevision {
			stored = stored.DeepCopy()
			stored.Replicas = rollout.Merge(stored.Replicas, rep, holders)
		}
		return stored, nil
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't report on the controller's rollout", "err", err)
	}
}

// tally is the gate's view of every parent the step moved: this replica's
// own, with the other replicas' reports of theirs with --shards.
func (r *Driver) tally(ctx context.Context) rollout.Tally {
	if r.shards == nil {
		return r.look(ctx)
	}
	r.mu.Lock()
	st := r.status.DeepCopy()
	r.mu.Unlock()
	var reports []v1alpha1.RolloutReplicaReport
	if stored := r.cfg.Controller.Stored(); stored != nil {
		reports = stored.Replicas
	}
	r.shards.tallied = r.ownReport(ctx, st)
	return r.gather(st, reports, r.shards.tallied)
}

// gather sums the reports of the step under way at st with this
// replica's own, as the shards' holders are now.
func (r *Driver) gather(st *v1alpha1.RolloutStatus, reports []v1alpha1.RolloutReplicaReport, own *v1alpha1.RolloutReplicaReport) rollout.Tally {
	holders := r.shards.group.Holders()
	return rollout.Gather(st, holders, rollout.Merge(reports, own, holders))
}

// sameStep tells whether rep reports on the step under way in st.
func sameStep(rep *v1alpha1.RolloutReplicaReport, st *v1alpha1.RolloutStatus) bool {
	return rep.UpdateRevision == st.UpdateRevision && rep.Step == st.Step &&
		rep.StepStartTime.Equal(st.StepStartTime)
}

// withReports is the driver's status to write over stored, keeping the
// replicas' reports stored.
func (r *Driver) withReports(status, stored *v1alpha1.RolloutStatus) *v1alpha1.RolloutStatus {
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

// gatedOnReports is the check, at the write of decision d, that the other
// replicas' reports stored then still sum, with this replica's own, to the
// tally a step passed or failed on. The tally read them from this
// replica's informer, which can be a write behind: a holder's report of a
// parent created in the step, stored before the decision, would otherwise
// be passed over (model seed 1796682040036589513), and a step would pass
// with a moved parent never synced. A decision the gate did not make (a
// wait, a pause) keeps whatever reports are stored.
func (r *Driver) gatedOnReports(in rollout.Input, d rollout.Decision) func(stored *v1alpha1.RolloutStatus) bool {
	st, own := in.Status, (*v1alpha1.RolloutReplicaReport)(nil)
	if r.shards != nil {
		own = r.shards.tallied
	}
	if own == nil || !d.Gated {
		return func(*v1alpha1.RolloutStatus) bool { return true }
	}
	t := in.View.Tally
	return func(stored *v1alpha1.RolloutStatus) bool {
		var reports []v1alpha1.RolloutReplicaReport
		if stored != nil {
			reports = stored.Replicas
		}
		now := r.gather(st, reports, own)
		return now.Updated == t.Updated && now.Healthy == t.Healthy && now.SyncFailures == t.SyncFailures &&
			slices.Equal(now.Failing, t.Failing) && slices.Equal(now.Unreported, t.Unreported)
	}
}
