package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
)

// countingServer is the target cluster as far as dry runs go: it answers a
// dry-run apply of a ConfigMap with the live one as the apply would store
// it, and counts the requests. A mutating policy (admit) rewrites what the
// hook set, as a webhook would.
type countingServer struct {
	live  map[string]*unstructured.Unstructured
	admit func(stored *unstructured.Unstructured)
	calls int
}

func (s *countingServer) DryRunApply(_ context.Context, _ schema.GroupVersionResource, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	s.calls++
	stored := s.live[want.GetName()].DeepCopy()
	stored.Object["data"] = runtime.DeepCopyJSONValue(want.Object["data"])
	stored.SetLabels(want.GetLabels())
	if s.admit != nil {
		s.admit(stored)
	}
	return stored, nil
}

// liveCM is an owned ConfigMap of that color stored at rv.
func liveCM(name, color, rv string) *unstructured.Unstructured {
	o := owned(cm(name, color))
	o.SetResourceVersion(rv)
	return o
}

// costSync is one sync of the measurement: the live children, and the
// dry runs it may cost.
type costSync struct {
	live []*unstructured.Unstructured
	want int
}

// TestDryRunsPerSync measures what the dry-run comparison costs: the dry-run
// applies each sync sends, with the loop's memo (fieldowner.Unchanged) as
// the field ownership. A converged child costs none; a child the update
// method leaves alone (OnDelete) costs none; a child that differs costs one
// when it or its desired object changes, and none on the next sync of the
// same live object; a rolling update asks only about the child it is about
// to move.
func TestDryRunsPerSync(t *testing.T) {
	team := func(value string) func(*unstructured.Unstructured) {
		return func(o *unstructured.Unstructured) {
			labels := o.GetLabels()
			labels["team"] = value
			o.SetLabels(labels)
		}
	}
	// withTeam is a live ConfigMap whose team label the policy set.
	withTeam := func(o *unstructured.Unstructured) *unstructured.Unstructured {
		team("x")(o)
		return o
	}
	five := []string{"c1", "c2", "c3", "c4", "c5"}
	allRed := func(rv string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, n := range five {
			o := readyCM(n, "red", "True")
			o.SetResourceVersion(rv)
			out = append(out, o)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		method  v1alpha1.ChildUpdateMethod
		desired *unstructured.Unstructured
		admit   func(*unstructured.Unstructured)
		rolling bool
		syncs   []costSync
	}{
		{name: "a converged child costs none", method: v1alpha1.ChildUpdateInPlace, desired: cm("c1", "blue"),
			syncs: []costSync{{live: []*unstructured.Unstructured{liveCM("c1", "blue", "5")}}, {live: []*unstructured.Unstructured{liveCM("c1", "blue", "5")}}}},
		{name: "a differing child that OnDelete leaves alone costs none", method: v1alpha1.ChildUpdateOnDelete, desired: cm("c1", "blue"),
			syncs: []costSync{{live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}}, {live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}},
				{live: []*unstructured.Unstructured{liveCM("c1", "red", "6")}}}},
		{name: "a differing child InPlace costs one, none again, one more once the live object changes", method: v1alpha1.ChildUpdateInPlace, desired: cm("c1", "blue"),
			syncs: []costSync{{live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}, want: 1}, {live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}},
				{live: []*unstructured.Unstructured{liveCM("c1", "red", "6")}, want: 1}}},
		{name: "a differing child Recreate costs the same", method: v1alpha1.ChildUpdateRecreate, desired: cm("c1", "blue"),
			syncs: []costSync{{live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}, want: 1}, {live: []*unstructured.Unstructured{liveCM("c1", "red", "5")}},
				{live: []*unstructured.Unstructured{liveCM("c1", "red", "6")}, want: 1}}},
		{name: "a child only admission makes converge costs one, none again, one more once the live object changes", method: v1alpha1.ChildUpdateInPlace,
			desired: func() *unstructured.Unstructured { o := cm("c1", "blue"); team("y")(o); return o }(), admit: team("x"),
			syncs: []costSync{{live: []*unstructured.Unstructured{withTeam(liveCM("c1", "blue", "5"))}, want: 1}, {live: []*unstructured.Unstructured{withTeam(liveCM("c1", "blue", "5"))}},
				{live: []*unstructured.Unstructured{withTeam(liveCM("c1", "blue", "6"))}, want: 1}}},
		{name: "a rolling update asks only about the child it moves", method: v1alpha1.ChildUpdateRollingInPlace, rolling: true,
			syncs: []costSync{{live: allRed("5"), want: 1}, {live: allRed("5")}, {live: allRed("6"), want: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := &countingServer{admit: tc.admit}
			memo := fieldowner.NewUnchanged(fieldowner.NewSchemas(nil), 100)
			var got, want []int
			for _, s := range tc.syncs {
				server.live = map[string]*unstructured.Unstructured{}
				for _, o := range s.live {
					server.live[o.GetName()] = o
				}
				var in Input
				if tc.rolling {
					var asked []string
					in = newInput(rollingController(tc.method), coloredParent("blue"), Claimed{Owned: s.live}, colorHook(&asked, five...))
					in.Revisions = append(in.Revisions, revisionOf(t, "red", five...))
				} else {
					cc := newController(func(cc *v1alpha1.CompositeController) {
						cc.Spec.ChildResources[0] = childRule("v1", "configmaps", tc.method)
					})
					in = newInput(cc, newParent(), Claimed{Owned: s.live}, returning(tc.desired))
				}
				in.Ownership, in.DryRun = memo, server
				before := server.calls
				if _, err := Compute(context.Background(), in); err != nil {
					t.Fatal(err)
				}
				got, want = append(got, server.calls-before), append(want, s.want)
			}
			t.Logf("dry runs per sync: %v", got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("dry runs per sync %v, want %v", got, want)
			}
		})
	}
}

// TestAChildThatMovedOnIsSyncedAgainSoon: a dry run that answers for a
// newer object than the one read decides nothing, and leaves the change to
// the sync that newer object brings. When the loop ignores its own child
// writes (spec.ownChildWrites: Ignore), that newer object may be its own
// write, whose echo syncs nothing: the plan asks for another sync soon, or
// the change would wait for the resync. Otherwise the echo syncs it.
func TestAChildThatMovedOnIsSyncedAgainSoon(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1alpha1.OwnChildWritesPolicy
		want   time.Duration
	}{
		{"own child writes ignored: synced again within a second", v1alpha1.OwnChildWritesIgnore, movedOnRecheck},
		{"own child writes sync: the echo does it", v1alpha1.OwnChildWritesSync, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			observed := liveCM("c1", "red", "9")
			written := liveCM("c1", "blue", "10")
			server := &countingServer{live: map[string]*unstructured.Unstructured{"c1": written}}
			cc := newController(func(cc *v1alpha1.CompositeController) { cc.Spec.OwnChildWrites = &tc.policy })
			in := newInput(cc, newParent(), Claimed{Owned: []*unstructured.Unstructured{observed}}, returning(cm("c1", "green")))
			in.Ownership, in.DryRun = fieldowner.NewUnchanged(fieldowner.NewSchemas(nil), 100), server
			p, err := Compute(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if it := p.Items[0]; it.Action != v1alpha1.SyncActionUnchanged || it.Reason != reasonMovedOn {
				t.Fatalf("item %s %q, want it left to the next sync", it.Action, it.Reason)
			}
			if p.Recheck != tc.want {
				t.Errorf("recheck after %v, want %v", p.Recheck, tc.want)
			}
		})
	}
}

// TestARollingChildOnlyTheServerFindsMatchingMovesForFree: the rollout asks
// the local merge alone which children of older revisions already match;
// a child that matches only once admission has had its say (here the
// server stores c1 as it is) moves for free when the rollout reaches it,
// and the next child is the one that moves, so that the sync is no no-op
// that nothing would follow up.
func TestARollingChildOnlyTheServerFindsMatchingMovesForFree(t *testing.T) {
	five := []string{"c1", "c2", "c3", "c4", "c5"}
	var observed []*unstructured.Unstructured
	for _, n := range five {
		o := readyCM(n, "red", "True")
		o.SetResourceVersion("5")
		observed = append(observed, o)
	}
	server := &countingServer{live: map[string]*unstructured.Unstructured{}, admit: func(o *unstructured.Unstructured) {
		if o.GetName() == "c1" {
			o.Object["data"] = map[string]interface{}{"color": "red"}
		}
	}}
	for _, o := range observed {
		server.live[o.GetName()] = o
	}
	var asked []string
	in := newInput(rollingController(v1alpha1.ChildUpdateRollingInPlace), coloredParent("blue"), Claimed{Owned: observed}, colorHook(&asked, five...))
	in.Revisions = []*v1alpha1.ControllerRevision{revisionOf(t, "red", five...)}
	in.Ownership, in.DryRun = fieldowner.NewUnchanged(fieldowner.NewSchemas(nil), 100), server
	p, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Rollout; r.Next != "ConfigMap c2" || len(r.Revisions) != 2 || !reflect.DeepEqual(r.Revisions[0].Children[0].Names, []string{"c1", "c2"}) {
		t.Errorf("next %q, latest revision's children %+v; want c1 moved for free and c2 moving", r.Next, r.Revisions[0].Children)
	}
	if server.calls != 2 {
		t.Errorf("%d dry runs, want 2: the child that matches and the one that moves", server.calls)
	}
}

// TestAPreviewGoesByWhatTheLoopLearnt: a preview asks the target cluster
// nothing (Input.DryRun nil), but with the loop's memo as its field
// ownership it plans what the loop planned from the cluster's answer, lines
// included: a change admission undoes is no change, and the lines of a
// change are the server's (here the team label the policy sets is not one
// of them).
func TestAPreviewGoesByWhatTheLoopLearnt(t *testing.T) {
	teamLabel := func(o *unstructured.Unstructured, value string) *unstructured.Unstructured {
		labels := o.GetLabels()
		labels["team"] = value
		o.SetLabels(labels)
		return o
	}
	for _, tc := range []struct {
		name       string
		desired    string
		wantAction v1alpha1.SyncAction
		wantDiff   []string
	}{
		{"admission undoes the change", "red", v1alpha1.SyncActionUnchanged, nil},
		{"a change admission lets through", "blue", v1alpha1.SyncActionUpdate, []string{`data.color: "red" -> "blue"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := teamLabel(liveCM("c1", "red", "5"), "x")
			server := &countingServer{live: map[string]*unstructured.Unstructured{"c1": live}, admit: func(o *unstructured.Unstructured) { teamLabel(o, "x") }}
			memo := fieldowner.NewUnchanged(fieldowner.NewSchemas(nil), 100)
			var plans []*Plan
			for _, dryRun := range []DryRunner{server, nil} {
				in := newInput(newController(), newParent(), Claimed{Owned: []*unstructured.Unstructured{live}}, returning(teamLabel(cm("c1", tc.desired), "y")))
				in.Ownership, in.DryRun = memo, dryRun
				p, err := Compute(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				plans = append(plans, p)
			}
			loop, preview := plans[0].Items[0], plans[1].Items[0]
			if server.calls != 1 || loop.Action != tc.wantAction || !reflect.DeepEqual(loop.Diff, tc.wantDiff) {
				t.Fatalf("the loop: %d dry runs, %s %q; want 1, %s %q", server.calls, loop.Action, loop.Diff, tc.wantAction, tc.wantDiff)
			}
			if preview.Action != loop.Action || !reflect.DeepEqual(preview.Diff, loop.Diff) {
				t.Errorf("the preview: %s %q; want the loop's %s %q", preview.Action, preview.Diff, loop.Action, loop.Diff)
			}
		})
	}
}
