package controllerregistry

import (
	"testing"

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
	Strip:  func(s spec) spec { s.Rollout = nil; return s },
	Entry:  func(r metacontroller.RevisionRecord, s spec) entry { return entry{r, s} },
	Record: func(e entry) metacontroller.RevisionRecord { return e.record },
	Spec:   func(e entry) spec { return e.spec },
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
	rev, h := testRevisions.Update(spec{Hook: "a"}, spec{Hook: "b"}, 0, author, nil, 0, 10)
	if rev != 2 || len(h) != 1 || h[0].record.Revision != 1 || h[0].spec.Hook != "a" || h[0].record.Author != author {
		t.Fatalf("a → b: revision %d, history %+v", rev, h)
	}
	if r2, h2 := testRevisions.Update(spec{Hook: "b"}, spec{Hook: "b", Rollout: &metacontroller.ControllerRollout{Paused: true}}, rev, nil, h, 0, 10); r2 != 2 || len(h2) != 1 {
		t.Errorf("a rollout change: revision %d, history %v; want 2 and [1]", r2, numbers(h2))
	}
	rev, h = testRevisions.Update(spec{Hook: "b"}, spec{Hook: "c"}, rev, nil, h, 0, 10)
	if rev != 3 || len(h) != 2 || h[0].record.Revision != 2 {
		t.Fatalf("b → c: revision %d, history %v", rev, numbers(h))
	}
	rev, h = testRevisions.Update(spec{Hook: "c"}, spec{Hook: "a"}, rev, nil, h, 0, 10)
	if got := numbers(h); rev != 4 || len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Errorf("undo to a: revision %d, history %v; want 4 and [3 2]", rev, got)
	}
	rev, h = testRevisions.Update(spec{Hook: "a"}, spec{Hook: "d"}, rev, nil, h, 2, 1)
	if got := numbers(h); rev != 5 || len(got) != 2 || got[0] != 4 || got[1] != 2 {
		t.Errorf("trimmed to 1 keeping 2: revision %d, history %v; want 5 and [4 2]", rev, got)
	}
}
