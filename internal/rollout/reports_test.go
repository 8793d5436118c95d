package rollout

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// TestGatherCountsEachShardOnceFromItsHolder: the reports of the step under
// way from the holders of exactly the shards they reported on are summed;
// a report of another step, of shards its replica no longer holds, or of a
// replica that holds none counts for nothing, and the shards it leaves
// uncovered keep the step from passing.
func TestGatherCountsEachShardOnceFromItsHolder(t *testing.T) {
	began := metav1.NewTime(time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(began.Add(-time.Minute))
	st := &v1alpha1.RolloutStatus{UpdateRevision: 2, Step: 1, StepStartTime: &began, Phase: v1alpha1.RolloutProgressing}
	report := func(replica string, shards []int32, start *metav1.Time, updated, healthy int32, failing ...string) v1alpha1.RolloutReplicaReport {
		return v1alpha1.RolloutReplicaReport{Replica: replica, Shards: shards, UpdateRevision: 2, Step: 1, StepStartTime: start,
			UpdatedParents: updated, HealthyParents: healthy, SyncFailures: int32(len(failing)), FailingParents: failing}
	}
	a := report("a", []int32{2, 0}, &began, 5, 4, "ns/p-1")
	b := report("b", []int32{1}, &began, 3, 3)
	c := report("c", []int32{3}, &began, 2, 1, "ns/p-9")

	for _, tc := range []struct {
		name       string
		holders    []string
		reports    []v1alpha1.RolloutReplicaReport
		want       Tally
		unreported []int
	}{{
		name:    "every shard reported by its holder",
		holders: []string{"a", "b", "a", "c"},
		reports: []v1alpha1.RolloutReplicaReport{a, b, c},
		want:    Tally{Updated: 10, Healthy: 8, SyncFailures: 2, Failing: []string{"ns/p-1", "ns/p-9"}},
	}, {
		name:       "a report of the step before it was resumed",
		holders:    []string{"a", "b", "a", "c"},
		reports:    []v1alpha1.RolloutReplicaReport{a, report("b", []int32{1}, &earlier, 3, 3), c},
		want:       Tally{Updated: 7, Healthy: 5, SyncFailures: 2, Failing: []string{"ns/p-1", "ns/p-9"}},
		unreported: []int{1},
	}, {
		name:       "shard 2 moved from a to b, neither has reported since",
		holders:    []string{"a", "b", "b", "c"},
		reports:    []v1alpha1.RolloutReplicaReport{a, b, c},
		want:       Tally{Updated: 2, Healthy: 1, SyncFailures: 1, Failing: []string{"ns/p-9"}},
		unreported: []int{0, 1, 2},
	}, {
		name:    "c died, b took shard 3 and reported; c's report is left",
		holders: []string{"a", "b", "a", "b"},
		reports: []v1alpha1.RolloutReplicaReport{a, report("b", []int32{3, 1}, &began, 5, 4), c},
		want:    Tally{Updated: 10, Healthy: 8, SyncFailures: 1, Failing: []string{"ns/p-1"}},
	}, {
		name:       "a shard nobody holds",
		holders:    []string{"a", "b", "a", ""},
		reports:    []v1alpha1.RolloutReplicaReport{a, b, c},
		want:       Tally{Updated: 8, Healthy: 7, SyncFailures: 1, Failing: []string{"ns/p-1"}},
		unreported: []int{3},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Gather(st, tc.holders, tc.reports)
			tc.want.Unreported = tc.unreported
			if got.Updated != tc.want.Updated || got.Healthy != tc.want.Healthy || got.SyncFailures != tc.want.SyncFailures ||
				!slices.Equal(got.Failing, tc.want.Failing) || !slices.Equal(got.Unreported, tc.want.Unreported) {
				t.Errorf("Gather = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMergeReplacesAReplicasReportAndDropsTheGone: a replica's new report
// replaces its old one, and the reports of replicas holding no shard go.
func TestMergeReplacesAReplicasReportAndDropsTheGone(t *testing.T) {
	old := []v1alpha1.RolloutReplicaReport{{Replica: "c", UpdatedParents: 1}, {Replica: "a", UpdatedParents: 1}, {Replica: "dead", UpdatedParents: 1}}
	got := Merge(old, &v1alpha1.RolloutReplicaReport{Replica: "a", UpdatedParents: 2}, []string{"a", "c", "a"})
	var names []string
	for _, r := range got {
		names = append(names, r.Replica)
		if r.Replica == "a" && r.UpdatedParents != 2 {
			t.Errorf("a's report is its old one")
		}
	}
	if !slices.Equal(names, []string{"a", "c"}) {
		t.Errorf("Merge kept the reports of %v, want a's and c's", names)
	}
}
