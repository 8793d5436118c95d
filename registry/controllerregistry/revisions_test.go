package controllerregistry

import (
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

type spec struct {
	Hook    string
	Rollout *metacontroller.ControllerRollout
}

type entry struct {
	record metacontroller.RevisionRecord
	spec   spec
}

var testRevisions = Revisions[spec, entry]{
	Strip:   func(s spec) spec { s.Rollout = nil; return s },
	Entry:   func(r metacontroller.RevisionRecord, s spec) entry { return entry{r, s} },
	Record:  func(e entry) metacontroller.RevisionRecord { return e.record },
	Spec:    func(e entry) spec { return e.spec },
	Rollout: func(s spec) *metacontroller.ControllerRollout { return s.Rollout },
}

func numbers(h []entry) []int64 {
	var out []int64
	for _, e := range h {
		out = append(out, e.record.Revision)
	}
	return out
}

// TestRevisionsNumberEachSpecOnce: a change of the hook is a new revision
// with the one replaced first in the history; a change of the rollout
// alone is none; writing an earlier spec back (undo) makes it the newest
// revision and takes it out of the history; trimming keeps the current
// revision of a rollout under way.
func TestRevisionsNumberEachSpecOnce(t *testing.T) {
	author := &metacontroller.ControllerAuthor{Username: "alice"}
	rev, h := testRevisions.Update(spec{Hook: "a"}, spec{Hook: "b"}, 0, author, nil, nil, 10)
	if rev != 2 || len(h) != 1 || h[0].record.Revision != 1 || h[0].spec.Hook != "a" || h[0].record.Author != author {
		t.Fatalf("a → b: revision %d, history %+v", rev, h)
	}
	if r2, h2 := testRevisions.Update(spec{Hook: "b"}, spec{Hook: "b", Rollout: &metacontroller.ControllerRollout{Paused: true}}, rev, nil, h, nil, 10); r2 != 2 || len(h2) != 1 {
		t.Errorf("a rollout change: revision %d, history %v; want 2 and [1]", r2, numbers(h2))
	}
	rev, h = testRevisions.Update(spec{Hook: "b"}, spec{Hook: "c"}, rev, nil, h, nil, 10)
	if rev != 3 || len(h) != 2 || h[0].record.Revision != 2 {
		t.Fatalf("b → c: revision %d, history %v", rev, numbers(h))
	}
	rev, h = testRevisions.Update(spec{Hook: "c"}, spec{Hook: "a"}, rev, nil, h, nil, 10)
	if got := numbers(h); rev != 4 || len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Errorf("undo to a: revision %d, history %v; want 4 and [3 2]", rev, got)
	}
	rev, h = testRevisions.Update(spec{Hook: "a"}, spec{Hook: "d"}, rev, nil, h, underWay(2, 4), 1)
	if got := numbers(h); rev != 5 || len(got) != 2 || got[0] != 4 || got[1] != 2 {
		t.Errorf("trimmed to 1 keeping 2: revision %d, history %v; want 5 and [4 2]", rev, got)
	}
}

func underWay(current, update int64) *metacontroller.RolloutStatus {
	return &metacontroller.RolloutStatus{CurrentRevision: current, UpdateRevision: update, Phase: metacontroller.RolloutProgressing}
}

// TestTrimmingKeepsTheRevisionsARolloutRollsFrom: whatever
// revisionHistoryLimit says, a new revision keeps in the history the
// revision its rollout rolls from (R3): the one it replaces, the current
// revision of a rollout under way, and the one the last rollout landed,
// which every parent still runs when two writes come before the loop
// reads the first. Without a rollout, the limit is the limit.
func TestTrimmingKeepsTheRevisionsARolloutRollsFrom(t *testing.T) {
	rollout := &metacontroller.ControllerRollout{Steps: []metacontroller.RolloutStep{{MaxParents: ptr.To[int32](1)}}}
	// Revision 3 (hook "c") is stored, revisions 2 and 1 in its history.
	history := []entry{{metacontroller.RevisionRecord{Revision: 2}, spec{Hook: "b"}}, {metacontroller.RevisionRecord{Revision: 1}, spec{Hook: "a"}}}
	landed := &metacontroller.RolloutStatus{CurrentRevision: 2, UpdateRevision: 2, Phase: metacontroller.RolloutComplete}
	cases := []struct {
		name    string
		rollout *metacontroller.ControllerRollout
		status  *metacontroller.RolloutStatus
		limit   int32
		want    []int64
	}{
		{name: "limit 0 without a rollout keeps nothing", limit: 0},
		{name: "limit 0 with a rollout keeps the revision replaced", rollout: rollout, limit: 0, want: []int64{3}},
		{name: "limit 0 keeps the current revision of a rollout under way", status: underWay(1, 3), limit: 0, want: []int64{1}},
		{name: "limit 0 with a rollout keeps the replaced and the current revision", rollout: rollout, status: underWay(1, 3), limit: 0, want: []int64{3, 1}},
		{name: "limit 0 with a rollout keeps the revision the last rollout landed", rollout: rollout, status: landed, limit: 0, want: []int64{3, 2}},
		{name: "limit 1 with a rollout keeps the revision the last rollout landed", rollout: rollout, status: landed, limit: 1, want: []int64{3, 2}},
		{name: "without a rollout a landed revision is trimmed", status: landed, limit: 0},
		{name: "a limit above the history keeps it all", rollout: rollout, status: landed, limit: 10, want: []int64{3, 2, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rev, h := testRevisions.Update(spec{Hook: "c"}, spec{Hook: "d", Rollout: c.rollout}, 3, nil, history, c.status, c.limit)
			if got := numbers(h); rev != 4 || !slices.Equal(got, c.want) {
				t.Errorf("revision %d, history %v; want 4 and %v", rev, got, c.want)
			}
		})
	}
}
