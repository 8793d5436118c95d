package rollout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// With --shards each replica syncs the parents of its shards, and only it
// knows how the update revision's syncs of them ended. Each replica
// reports what it saw of the step under way among them
// (v1alpha1.RolloutReplicaReport, in status.rollout.replicas), and the
// rollout's driver sums the reports. A report counts only when it is of
// the step under way and its replica holds, as the driver sees the
// shards' Leases, exactly the shards it reported on: a replica that lost
// or gained a shard since reports again before its parents count, and a
// dead replica's report counts for nothing once its shards moved.

// Tally is what the reports of a step say together.
type Tally struct {
	Updated, Healthy, SyncFailures int32
	// Failing name the step's parents that fail its gate, sorted.
	Failing []string
	// Unreported are the shards no report counted for: the step does not
	// pass while there are any.
	Unreported []int
	// Paused are the step's parents paused by their annotation, which the
	// loop does not sync: neither moved nor failing, counted apart (R6).
	Paused int32
	// HealthErrors are the moved parents the health condition could not
	// be evaluated on, HealthError the first error: they fail the gate,
	// and the status says why.
	HealthErrors int32
	HealthError  string
}

// OfStep tells whether the report is of the step under way at status.
func OfStep(r *v1alpha1.RolloutReplicaReport, status *v1alpha1.RolloutStatus) bool {
	return r.UpdateRevision == status.UpdateRevision && r.Step == status.Step &&
		(r.StepStartTime == nil) == (status.StepStartTime == nil) &&
		(r.StepStartTime == nil || r.StepStartTime.Equal(status.StepStartTime))
}

// Gather sums the reports of the step under way at status, given which
// replica holds each shard (holders, "" for nobody).
func Gather(status *v1alpha1.RolloutStatus, holders []string, reports []v1alpha1.RolloutReplicaReport) Tally {
	held := map[string][]int32{}
	for s, h := range holders {
		if h != "" {
			held[h] = append(held[h], int32(s))
		}
	}
	var t Tally
	covered := make([]bool, len(holders))
	for i := range reports {
		r := &reports[i]
		shards := slices.Sorted(slices.Values(r.Shards))
		if !OfStep(r, status) || len(shards) == 0 || !slices.Equal(shards, held[r.Replica]) {
			continue
		}
		for _, s := range shards {
			covered[s] = true
		}
		t.Updated += r.UpdatedParents
		t.Healthy += r.HealthyParents
		t.SyncFailures += r.SyncFailures
		t.Failing = append(t.Failing, r.FailingParents...)
	}
	for s, ok := range covered {
		if !ok {
			t.Unreported = append(t.Unreported, s)
		}
	}
	slices.Sort(t.Failing)
	return t
}

// Merge puts report in place of its replica's in reports, and drops the
// reports of replicas that hold no shard now (gone, or left the group).
func Merge(reports []v1alpha1.RolloutReplicaReport, report *v1alpha1.RolloutReplicaReport, holders []string) []v1alpha1.RolloutReplicaReport {
	var out []v1alpha1.RolloutReplicaReport
	for _, r := range reports {
		if r.Replica != report.Replica && slices.Contains(holders, r.Replica) {
			out = append(out, r)
		}
	}
	out = append(out, *report)
	slices.SortFunc(out, func(a, b v1alpha1.RolloutReplicaReport) int { return strings.Compare(a.Replica, b.Replica) })
	return out
}

// notes are what the status adds to a step's count of healthy parents.
func (t Tally) notes() string {
	var s string
	if t.Paused > 0 {
		s += fmt.Sprintf("; %d paused parents not gated", t.Paused)
	}
	if t.HealthErrors > 0 {
		s += fmt.Sprintf("; the health condition failed on %d parents: %s", t.HealthErrors, t.HealthError)
	}
	return s
}

// Waiting says which shards the step waits for the reports of.
func (t Tally) Waiting() string {
	return fmt.Sprintf("no report yet from the holders of shards %v", t.Unreported)
}
