package controller

import (
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// TestRolloutBeginsFromTheRevisionThatRan: a new revision's rollout rolls
// from the revision the parents ran before, whatever this replica knows of
// it; never from "nothing", which would land the change on every parent at
// once (R3: a restart or failover before the rollout's status was
// written, or a first write that failed).
func TestRolloutBeginsFromTheRevisionThatRan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   *v1alpha1.RolloutStatus
		previous int64
		want     int64
	}{
		{"the running loop's revision", nil, 3, 3},
		{"a server that started after the change: the history's newest", nil, 0, 4},
		{"a rollout under way: its current revision", &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutPaused, CurrentRevision: 2, UpdateRevision: 4}, 4, 2},
		{"a rollout complete: its update revision", &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutComplete, CurrentRevision: 4, UpdateRevision: 4}, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			revs := revisions{revision: 5, status: tc.status, newest: 4}
			if got := beganFrom(revs, tc.previous); got != tc.want {
				t.Errorf("began from revision %d, want %d", got, tc.want)
			}
		})
	}
}
