package engine

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// rollingController declares configmaps with the method, waiting for
// Ready=True.
func rollingController(method v1alpha1.ChildUpdateMethod) *v1alpha1.CompositeController {
	return newController(func(cc *v1alpha1.CompositeController) {
		cc.Spec.ChildResources[0].UpdateStrategy = &v1alpha1.CompositeControllerChildUpdateStrategy{
			Method: method,
			StatusChecks: v1alpha1.ChildUpdateStatusChecks{Conditions: []v1alpha1.StatusConditionCheck{
				{Type: "Ready", Status: ptr.To("True")},
			}},
		}
	})
}

// coloredParent is the parent with spec.color.
func coloredParent(color string) *unstructured.Unstructured {
	p := newParent()
	setField(p.Object, color, "spec", "color")
	return p
}

// colorHook returns ConfigMaps names (in that order) with the parent's
// spec.color, and counts the colors it was asked about.
func colorHook(asked *[]string, names ...string) hookapi.SyncHook {
	return hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		color, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "color")
		*asked = append(*asked, color)
		var children []*unstructured.Unstructured
		for _, n := range names {
			children = append(children, cm(n, color))
		}
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"color": color}, Children: children}, nil
	})
}

// readyCM is an owned ConfigMap of that color whose Ready condition has
// the status.
func readyCM(name, color, ready string) *unstructured.Unstructured {
	obj := owned(cm(name, color))
	if ready != "" {
		obj.Object["status"] = map[string]interface{}{"conditions": []interface{}{
			map[string]interface{}{"type": "Ready", "status": ready},
		}}
	}
	return obj
}

// revisionOf is the stored revision of the parent at color, claiming the
// ConfigMaps names.
func revisionOf(t *testing.T, color string, names ...string) *v1alpha1.ControllerRevision {
	t.Helper()
	p := coloredParent(color)
	patch, err := revisionPatch(p.Object, []string{"spec"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := canonicalJSON(patch)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := newRevision(compile(rollingController(v1alpha1.ChildUpdateRollingInPlace)), p, data)
	if err != nil {
		t.Fatal(err)
	}
	rev.UID = k8stypes.UID("uid-rev-" + color)
	rev.ResourceVersion = "1"
	if len(names) > 0 {
		rev.Children = []v1alpha1.ControllerRevisionChildren{{APIGroup: "", Kind: "ConfigMap", Names: names}}
	}
	return rev
}

type rollingCase struct {
	name      string
	method    v1alpha1.ChildUpdateMethod
	order     []string
	observed  []*unstructured.Unstructured
	revisions []*v1alpha1.ControllerRevision
	// want are the plan items that change something.
	want       []string
	wantReason string
	wantNext   string
	// wantMessage is part of the Updated condition's message.
	wantMessage string
	// wantClaims are the children of each live revision after the sync,
	// by color, latest (blue) first.
	wantClaims map[string][]string
	check      func(t *testing.T, p *Plan, asked []string)
}

// TestRollingDecision is the rollout's decision table: which child moves,
// given the revisions, the children's states and their checks. The parent
// is blue now; red is the older revision.
func TestRollingDecision(t *testing.T) {
	five := []string{"c1", "c2", "c3", "c4", "c5"}
	allRed := func(ready string) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, n := range five {
			out = append(out, readyCM(n, "red", ready))
		}
		return out
	}
	for _, tc := range []rollingCase{
		{
			name:      "every child on the old revision and ready: the first in the answer's order moves, alone",
			observed:  allRed("True"),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "red", five...)},
			want:      []string{"Update ConfigMap ns/c1"}, wantReason: ReasonRolloutProgressing, wantNext: "ConfigMap c1",
			wantClaims: map[string][]string{"blue": {"c1"}, "red": {"c2", "c3", "c4", "c5"}},
			check: func(t *testing.T, p *Plan, asked []string) {
				if !reflect.DeepEqual(asked, []string{"blue", "red"}) {
					t.Errorf("the hook was asked for %v, want the parent now and at its older revision", asked)
				}
				r := p.Rollout
				if len(r.Create) != 1 || r.Create[0].Name != r.Latest || len(r.Update) != 1 || len(r.Delete) != 0 {
					t.Errorf("revision writes: create %d update %d delete %d", len(r.Create), len(r.Update), len(r.Delete))
				}
				for _, it := range p.Items {
					if it.Desired.GetName() == "c2" {
						if it.Revision == r.Latest || !strings.Contains(it.Reason, "older ControllerRevision") {
							t.Errorf("c2 follows %q: %q", it.Revision, it.Reason)
						}
						if v, _, _ := unstructured.NestedString(it.Desired.Object, "data", "color"); v != "red" {
							t.Errorf("c2 is desired %s, want the old revision's red", v)
						}
					}
				}
			},
		},
		{
			name:     "the answer's order is the rollout's order",
			order:    []string{"c5", "c4", "c3", "c2", "c1"},
			observed: allRed("True"), revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "red", five...)},
			want: []string{"Update ConfigMap ns/c5"}, wantReason: ReasonRolloutProgressing, wantNext: "ConfigMap c5",
		},
		{
			name:      "the child on the latest revision is updated and ready: the next one moves",
			observed:  append([]*unstructured.Unstructured{readyCM("c1", "blue", "True")}, allRed("True")[1:]...),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			want:      []string{"Update ConfigMap ns/c2"}, wantReason: ReasonRolloutProgressing, wantNext: "ConfigMap c2",
			wantClaims: map[string][]string{"blue": {"c1", "c2"}, "red": {"c3", "c4", "c5"}},
		},
		{
			name:       "the child on the latest revision is not ready: nothing moves, and the condition says which check",
			observed:   append([]*unstructured.Unstructured{readyCM("c1", "blue", "False")}, allRed("True")[1:]...),
			revisions:  []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			wantReason: ReasonRolloutWaiting, wantMessage: `ConfigMap c1: condition "Ready" has status "False", want "True"`,
			wantClaims: map[string][]string{"blue": {"c1"}, "red": {"c2", "c3", "c4", "c5"}},
			check: func(t *testing.T, p *Plan, asked []string) {
				if r := p.Rollout; len(r.Create)+len(r.Update)+len(r.Delete) != 0 {
					t.Errorf("a waiting rollout writes revisions: %+v", r)
				}
			},
		},
		{
			name:       "a child without the condition halts the rollout too",
			observed:   append([]*unstructured.Unstructured{readyCM("c1", "blue", "")}, allRed("True")[1:]...),
			revisions:  []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			wantReason: ReasonRolloutWaiting, wantMessage: `ConfigMap c1: condition "Ready" is missing`,
		},
		{
			name:      "the child on the latest revision is not updated yet: it is updated again, nothing else moves",
			observed:  allRed("True"),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			want:      []string{"Update ConfigMap ns/c1"}, wantReason: ReasonRolloutWaiting, wantMessage: "ConfigMap c1: not updated yet",
		},
		{
			name: "RollingInPlace waits for status.observedGeneration to reach the generation",
			observed: append([]*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := readyCM("c1", "blue", "True")
				o.SetGeneration(3)
				setField(o.Object, int64(2), "status", "observedGeneration")
				return o
			}()}, allRed("True")[1:]...),
			revisions:  []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			wantReason: ReasonRolloutWaiting, wantMessage: "status.observedGeneration 2 has not reached generation 3",
		},
		{
			name:      "the child on the latest revision is gone (RollingRecreate deleted it): it is created, nothing else moves",
			method:    v1alpha1.ChildUpdateRollingRecreate,
			observed:  allRed("True")[1:],
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			want:      []string{"Create ConfigMap ns/c1"}, wantReason: ReasonRolloutWaiting, wantMessage: "ConfigMap c1: not observed yet",
		},
		{
			name:      "RollingRecreate recreates the child that moves",
			method:    v1alpha1.ChildUpdateRollingRecreate,
			observed:  allRed("True"),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "red", five...)},
			want:      []string{"Recreate ConfigMap ns/c1"}, wantReason: ReasonRolloutProgressing, wantNext: "ConfigMap c1",
		},
		{
			name: "children that already match the latest revision move at once, besides the one that moves",
			observed: []*unstructured.Unstructured{readyCM("c1", "red", "True"), readyCM("c2", "blue", "True"), readyCM("c3", "red", "True"),
				readyCM("c4", "blue", "True"), readyCM("c5", "red", "True")},
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "red", five...)},
			want:      []string{"Update ConfigMap ns/c1"}, wantReason: ReasonRolloutProgressing, wantNext: "ConfigMap c1",
			wantClaims: map[string][]string{"blue": {"c2", "c4", "c1"}, "red": {"c3", "c5"}},
		},
		{
			name:      "new children go to the latest revision and are created even while the rollout waits",
			order:     []string{"c1", "c2", "c3", "c4", "c5", "c6"},
			observed:  append([]*unstructured.Unstructured{readyCM("c1", "blue", "False")}, allRed("True")[1:]...),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			want:      []string{"Create ConfigMap ns/c6"}, wantReason: ReasonRolloutWaiting,
			wantClaims: map[string][]string{"blue": {"c1", "c6"}, "red": {"c2", "c3", "c4", "c5"}},
		},
		{
			name:      "a child the hook no longer returns is deleted at once and leaves its revision",
			order:     []string{"c1", "c2", "c3", "c4"},
			observed:  append([]*unstructured.Unstructured{readyCM("c1", "blue", "False")}, allRed("True")[1:]...),
			revisions: []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1"), revisionOf(t, "red", "c2", "c3", "c4", "c5")},
			want:      []string{"Delete ConfigMap ns/c5"}, wantReason: ReasonRolloutWaiting,
			wantClaims: map[string][]string{"blue": {"c1"}, "red": {"c2", "c3", "c4"}},
			check: func(t *testing.T, p *Plan, asked []string) {
				if len(p.Rollout.Update) != 1 {
					t.Errorf("the old revision's claims are not rewritten: %+v", p.Rollout.Update)
				}
			},
		},
		{
			name: "the last child of the old revision already matches: OnLatestRevision, and the old revision is deleted",
			observed: []*unstructured.Unstructured{readyCM("c1", "blue", "True"), readyCM("c2", "blue", "True"), readyCM("c3", "blue", "True"),
				readyCM("c4", "blue", "True"), readyCM("c5", "blue", "True")},
			revisions:  []*v1alpha1.ControllerRevision{revisionOf(t, "blue", "c1", "c2", "c3", "c4"), revisionOf(t, "red", "c5")},
			wantReason: ReasonOnLatestRevision,
			wantClaims: map[string][]string{"blue": {"c1", "c2", "c3", "c4", "c5"}},
			check: func(t *testing.T, p *Plan, asked []string) {
				if r := p.Rollout; len(r.Delete) != 1 || !strings.Contains(r.Delete[0].Name, "things.example.com-") || len(r.Revisions) != 1 {
					t.Errorf("delete %v, live %d", r.Delete, len(r.Revisions))
				}
			},
		},
		{
			name:     "an orphaned revision of the parent is adopted",
			observed: allRed("True"),
			revisions: []*v1alpha1.ControllerRevision{func() *v1alpha1.ControllerRevision {
				r := revisionOf(t, "red", five...)
				r.OwnerReferences = nil
				r.Labels["app"] = "p"
				return r
			}()},
			want: []string{"Update ConfigMap ns/c1"}, wantReason: ReasonRolloutProgressing,
			check: func(t *testing.T, p *Plan, asked []string) {
				r := p.Rollout
				if len(r.Update) != 1 || metav1.GetControllerOf(r.Update[0]) == nil || metav1.GetControllerOf(r.Update[0]).UID != parentUID {
					t.Errorf("the orphan is not adopted: %+v", r.Update)
				}
			},
		},
		{
			name:     "a revision another parent controls is left alone",
			observed: allRed("True"),
			revisions: []*v1alpha1.ControllerRevision{func() *v1alpha1.ControllerRevision {
				r := revisionOf(t, "red", five...)
				r.OwnerReferences[0].UID = "someone"
				return r
			}()},
			want:       []string{"Update ConfigMap ns/c1", "Update ConfigMap ns/c2", "Update ConfigMap ns/c3", "Update ConfigMap ns/c4", "Update ConfigMap ns/c5"},
			wantReason: ReasonOnLatestRevision,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = v1alpha1.ChildUpdateRollingInPlace
			}
			order := tc.order
			if order == nil {
				order = five
			}
			var asked []string
			in := newInput(rollingController(method), coloredParent("blue"), Claimed{Owned: tc.observed}, colorHook(&asked, order...))
			in.Revisions = tc.revisions
			p, err := Compute(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			var changing []string
			for i, s := range summary(p) {
				if p.Items[i].Action != v1alpha1.SyncActionUnchanged {
					changing = append(changing, s)
				}
			}
			if !reflect.DeepEqual(changing, tc.want) {
				t.Errorf("changes %q, want %q", changing, tc.want)
			}
			r := p.Rollout
			if r == nil {
				t.Fatal("no rollout")
			}
			if r.Reason != tc.wantReason || r.Next != tc.wantNext && tc.wantNext != "" || !strings.Contains(r.Message, tc.wantMessage) {
				t.Errorf("rollout %s %q next %q", r.Reason, r.Message, r.Next)
			}
			cond := StatusCondition(&unstructured.Unstructured{Object: map[string]interface{}{"status": p.Response.Status}}, UpdatedCondition)
			if cond == nil || cond["reason"] != tc.wantReason || cond["message"] != r.Message || p.Response.Status["color"] != "blue" {
				t.Errorf("parent status %v", p.Response.Status)
			}
			if tc.wantClaims != nil {
				got := map[string][]string{}
				for _, rev := range r.Revisions {
					var patch struct {
						Spec struct{ Color string } `json:"spec"`
					}
					if err := json.Unmarshal(rev.ParentPatch.Raw, &patch); err != nil {
						t.Fatal(err)
					}
					for _, ck := range rev.Children {
						got[patch.Spec.Color] = append(got[patch.Spec.Color], ck.Names...)
					}
				}
				if !reflect.DeepEqual(got, tc.wantClaims) {
					t.Errorf("claims %v, want %v", got, tc.wantClaims)
				}
			}
			if tc.check != nil {
				tc.check(t, p, asked)
			}
		})
	}
}

// TestRevisionName is Metacontroller's name, so that revisions it wrote are
// found again: <resource>.<group>-sha1(parent UID, parentPatch).
func TestRevisionName(t *testing.T) {
	p := coloredParent("blue")
	patch, _ := revisionPatch(p.Object, []string{"spec"})
	data, _ := canonicalJSON(patch)
	want := `{"spec":{"color":"blue","selector":{"matchLabels":{"app":"p"}}}}`
	if string(data) != want {
		t.Fatalf("patch %s, want %s", data, want)
	}
	h := sha1.Sum([]byte(parentUID + want))
	if got := RevisionName(thingsGVR, parentUID, data); got != "things.example.com-"+hex.EncodeToString(h[:]) {
		t.Errorf("name %s", got)
	}
	if got := RevisionName(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "u", nil); !strings.HasPrefix(got, "configmaps.core-") {
		t.Errorf("core group name %s", got)
	}
}

// TestRollingOnlyWithRollingStrategies: a controller without a Rolling*
// child resource has no rollout and calls the hook once.
func TestRollingOnlyWithRollingStrategies(t *testing.T) {
	var asked []string
	cc := newController(func(cc *v1alpha1.CompositeController) { cc.Spec.ChildResources[3].UpdateStrategy = nil })
	in := newInput(cc, coloredParent("blue"), Claimed{}, colorHook(&asked, "c1"))
	in.Revisions = []*v1alpha1.ControllerRevision{revisionOf(t, "red", "c1")}
	p, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rollout != nil || len(asked) != 1 {
		t.Errorf("rollout %+v, hook asked %v", p.Rollout, asked)
	}
}

// Patches run once per revision with the parent as it was: a child that
// follows the older revision is patched as that parent would have it.
func TestRollingPatchesEachRevisionWithItsParent(t *testing.T) {
	stamp := hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		color, _ := req.Variables.Builtin.Parent.Spec["color"].(string)
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch,
				Patch: json.RawMessage(`{"data":{"stamp":"` + color + `"}}`)})
		}
		return resp, nil
	})
	cc := rollingController(v1alpha1.ChildUpdateRollingInPlace)
	withPatches("stamp")(cc)
	var asked []string
	var observed []*unstructured.Unstructured
	for _, n := range []string{"c1", "c2"} {
		o := readyCM(n, "red", "True")
		setField(o.Object, "red", "data", "stamp")
		observed = append(observed, o)
	}
	in := newInput(cc, coloredParent("blue"), Claimed{Owned: observed}, colorHook(&asked, "c1", "c2"))
	in.Hooks.Patches = patches.New(patches.Step{Name: "stamp", Generator: stamp})
	in.Revisions = []*v1alpha1.ControllerRevision{revisionOf(t, "red", "c1", "c2")}
	p, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		stamp, _, _ := unstructured.NestedString(it.Desired.Object, "data", "stamp")
		color, _, _ := unstructured.NestedString(it.Desired.Object, "data", "color")
		if stamp != color {
			t.Errorf("%s: desired color %s stamped %s", it.Desired.GetName(), color, stamp)
		}
	}
	if len(p.Patches) != 1 || p.Patches[0].Name != "stamp" {
		t.Errorf("plan's patch steps %+v", p.Patches)
	}
}

// A cluster-scoped parent has no namespace for ControllerRevisions: its
// rolling children are updated at once, and the plan says why.
func TestRollingNeedsANamespacedParent(t *testing.T) {
	var asked []string
	parent := coloredParent("blue")
	parent.SetNamespace("")
	cm := object("v1", "ConfigMap", "ns", "c1", "data.color", "red")
	in := newInput(rollingController(v1alpha1.ChildUpdateRollingInPlace), parent, Claimed{Owned: []*unstructured.Unstructured{owned(cm)}}, colorHook(&asked, "c1"))
	p, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rollout != nil || !containsProblem(p.Warnings, "rolling updates need a namespaced parent") {
		t.Errorf("rollout %+v, warnings %q", p.Rollout, p.Warnings)
	}
}
