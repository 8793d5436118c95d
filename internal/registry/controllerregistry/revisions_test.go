package controllerregistry

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

type spec struct {
	Hook    string
	Rollout *metacontroller.ControllerRollout
}

// entry is a history entry, its fields exported for the size of its JSON.
type entry struct {
	Record metacontroller.RevisionRecord
	Spec   spec
}

var testRevisions = Revisions[spec, entry]{
	Strip:   func(s spec) spec { s.Rollout = nil; return s },
	Entry:   func(r metacontroller.RevisionRecord, s spec) entry { return entry{r, s} },
	Record:  func(e entry) metacontroller.RevisionRecord { return e.Record },
	Spec:    func(e entry) spec { return e.Spec },
	Rollout: func(s spec) *metacontroller.ControllerRollout { return s.Rollout },
}

func numbers(h []entry) []int64 {
	var out []int64
	for _, e := range h {
		out = append(out, e.Record.Revision)
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
	rev, h, _ := testRevisions.Update(spec{Hook: "a"}, spec{Hook: "b"}, 0, author, nil, nil, 10)
	if rev != 2 || len(h) != 1 || h[0].Record.Revision != 1 || h[0].Spec.Hook != "a" || h[0].Record.Author != author {
		t.Fatalf("a → b: revision %d, history %+v", rev, h)
	}
	if r2, h2, _ := testRevisions.Update(spec{Hook: "b"}, spec{Hook: "b", Rollout: &metacontroller.ControllerRollout{Paused: true}}, rev, nil, h, nil, 10); r2 != 2 || len(h2) != 1 {
		t.Errorf("a rollout change: revision %d, history %v; want 2 and [1]", r2, numbers(h2))
	}
	rev, h, _ = testRevisions.Update(spec{Hook: "b"}, spec{Hook: "c"}, rev, nil, h, nil, 10)
	if rev != 3 || len(h) != 2 || h[0].Record.Revision != 2 {
		t.Fatalf("b → c: revision %d, history %v", rev, numbers(h))
	}
	rev, h, _ = testRevisions.Update(spec{Hook: "c"}, spec{Hook: "a"}, rev, nil, h, nil, 10)
	if got := numbers(h); rev != 4 || len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Errorf("undo to a: revision %d, history %v; want 4 and [3 2]", rev, got)
	}
	rev, h, _ = testRevisions.Update(spec{Hook: "a"}, spec{Hook: "d"}, rev, nil, h, underWay(2, 4), 1)
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
			rev, h, _ := testRevisions.Update(spec{Hook: "c"}, spec{Hook: "d", Rollout: c.rollout}, 3, nil, history, c.status, c.limit)
			if got := numbers(h); rev != 4 || !slices.Equal(got, c.want) {
				t.Errorf("revision %d, history %v; want 4 and %v", rev, got, c.want)
			}
		})
	}
}

// TestHistoryIsTrimmedToItsByteBudget: however many revisions
// revisionHistoryLimit keeps, the oldest are dropped while the history's
// JSON exceeds its budget, so that a controller of large specs can still
// be written (R20); a revision a rollout rolls from is never dropped, and
// the revisions dropped are named for the write's warning.
func TestHistoryIsTrimmedToItsByteBudget(t *testing.T) {
	// A hook of a quarter of the budget: three such revisions do not fit.
	big := func(c string) string { return strings.Repeat(c, historyBudget/4) }
	huge := func(c string) string { return strings.Repeat(c, historyBudget) }
	// Revision 4 (hook "d") is stored; 3, 2 and 1 in its history.
	history := func(hook func(string) string) []entry {
		return []entry{
			{metacontroller.RevisionRecord{Revision: 3}, spec{Hook: hook("c")}},
			{metacontroller.RevisionRecord{Revision: 2}, spec{Hook: hook("b")}},
			{metacontroller.RevisionRecord{Revision: 1}, spec{Hook: hook("a")}},
		}
	}
	small := func(c string) string { return c }
	rollout := &metacontroller.ControllerRollout{Steps: []metacontroller.RolloutStep{{MaxParents: ptr.To[int32](1)}}}
	cases := []struct {
		name    string
		stored  func(string) string
		new     func(string) string
		rollout *metacontroller.ControllerRollout
		status  *metacontroller.RolloutStatus
		want    []int64
		dropped []int64
	}{
		{name: "small specs keep what the limit keeps", stored: small, new: small, want: []int64{4, 3, 2, 1}},
		{name: "large specs drop the oldest beyond the budget", stored: big, new: big, want: []int64{4, 3, 2}, dropped: []int64{1}},
		{name: "the revision a rollout under way rolls from is kept, the next oldest dropped", stored: big, new: big,
			status: underWay(1, 4), want: []int64{4, 3, 1}, dropped: []int64{2}},
		{name: "the revisions a new rollout rolls from are kept", stored: big, new: big, rollout: rollout,
			status: &metacontroller.RolloutStatus{CurrentRevision: 1, UpdateRevision: 1, Steps: 1, Phase: metacontroller.RolloutComplete},
			want:   []int64{4, 3, 1}, dropped: []int64{2}},
		{name: "revisions each over the budget are all dropped, the newest too", stored: huge, new: huge,
			want: nil, dropped: []int64{1, 2, 3, 4}},
		{name: "a revision over the budget that a rollout rolls from is kept", stored: huge, new: huge, rollout: rollout,
			want: []int64{4}, dropped: []int64{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rev, h, dropped := testRevisions.Update(spec{Hook: c.stored("d")}, spec{Hook: c.new("e"), Rollout: c.rollout}, 4, nil, history(c.stored), c.status, 10)
			if got := numbers(h); rev != 5 || !slices.Equal(got, c.want) || !slices.Equal(dropped, c.dropped) {
				t.Errorf("revision %d, history %v, dropped %v; want 5, %v and %v", rev, got, dropped, c.want, c.dropped)
			}
			size := 0
			for _, e := range h {
				size += jsonSize(e)
			}
			if size > historyBudget && c.rollout == nil {
				t.Errorf("the history kept is %d bytes of JSON, over the budget %d", size, historyBudget)
			}
		})
	}
}
