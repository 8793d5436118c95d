package engine

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// withPatches declares patches of these names, as the pipeline built for
// the input has them.
func withPatches(names ...string) func(*v1alpha1.CompositeController) {
	return func(cc *v1alpha1.CompositeController) {
		for _, n := range names {
			// A webhook that is never called: the tests give the
			// pipeline's generators themselves.
			cc.Spec.Hooks.Patches = append(cc.Spec.Hooks.Patches, v1alpha1.PatchHook{Name: n,
				Webhook: &v1alpha1.Webhook{URL: ptr.To("https://patches.example/" + n)}})
		}
	}
}

// mergePatching answers the same JSON merge patch for every child of the
// given kind.
func mergePatching(kind, patch string) hookapi.Generator {
	return hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			if item.Ref.Kind == kind {
				resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(patch)})
			}
		}
		return resp, nil
	})
}

func patchedInput(cc *v1alpha1.CompositeController, children Claimed, hook hookapi.SyncHook, steps ...patches.Step) Input {
	in := newInput(cc, newParent(), children, hook)
	in.Hooks.Patches = patches.New(steps...)
	return in
}

func TestComputeAppliesPatchesInOrderBeforePlanning(t *testing.T) {
	cc := newController(withPatches("size", "shape"))
	children := Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}}
	// The second patch reads what the first left.
	second := hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			size, _, _ := unstructured.NestedString(item.Object.Object, "data", "size")
			if item.Ref.Kind == "ConfigMap" {
				patch := `[{"op":"add","path":"/data/shape","value":"` + size + `-round"}]`
				resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONPatch, Patch: json.RawMessage(patch)})
			}
		}
		return resp, nil
	})
	in := patchedInput(cc, children, returning(cm("a", "blue"), cm("b", "blue")),
		patches.Step{Name: "size", Generator: mergePatching("ConfigMap", `{"data":{"size":"L","color":null}}`)},
		patches.Step{Name: "shape", Generator: second},
	)
	plan, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(plan); !reflect.DeepEqual(got, []string{"Update ConfigMap ns/a", "Create ConfigMap ns/b"}) {
		t.Errorf("plan %v", got)
	}
	for _, d := range plan.Desired {
		if got, want := d.Object["data"], map[string]interface{}{"size": "L", "shape": "L-round"}; !reflect.DeepEqual(got, want) {
			t.Errorf("desired %s data %v, want %v", d.GetName(), got, want)
		}
	}
	// The plan compares the patched child with the observed one.
	want := []string{`- data.color: "blue"`, `data.shape: <none> -> "L-round"`, `data.size: <none> -> "L"`}
	if got := plan.Items[0].Diff; !reflect.DeepEqual(got, want) {
		t.Errorf("diff of a %q, want %q", got, want)
	}
	if len(plan.Patches) != 2 || plan.Patches[0].Name != "size" || plan.Patches[1].Name != "shape" || len(plan.Patches[1].Changes) != 2 {
		t.Fatalf("plan.Patches %+v", plan.Patches)
	}
	// The sync hook's answer is kept as it gave it.
	if got := plan.Response.Children[0].Object["data"]; !reflect.DeepEqual(got, map[string]interface{}{"color": "blue"}) {
		t.Errorf("the hook's answer was changed: %v", got)
	}
}

func TestComputeSkipsADisabledPatch(t *testing.T) {
	cond, err := variables.CompileCondition(`builtin.parent.metadata.name == "someone-else"`)
	if err != nil {
		t.Fatal(err)
	}
	in := patchedInput(newController(withPatches("never")), Claimed{}, returning(cm("a", "blue")),
		patches.Step{Name: "never", EnabledIf: cond, Generator: mergePatching("ConfigMap", `{"data":{"color":"red"}}`)})
	plan, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Desired[0].Object["data"]; !reflect.DeepEqual(got, map[string]interface{}{"color": "blue"}) {
		t.Errorf("a disabled patch changed the child: %v", got)
	}
	if len(plan.Patches) != 1 || !plan.Patches[0].Skipped {
		t.Errorf("plan.Patches %+v, want the patch skipped", plan.Patches)
	}
}

func TestComputeValidatesWhatPatchesLeave(t *testing.T) {
	// A patch adding what the API server owns, and labels, is normalized
	// as a sync hook's answer would be.
	in := patchedInput(newController(withGenerateSelector, withPatches("meta")), Claimed{}, returning(cm("a", "blue")),
		patches.Step{Name: "meta", Generator: mergePatching("ConfigMap",
			`{"metadata":{"resourceVersion":"12","uid":"x","labels":{"tier":"web"}},"status":{"x":1}}`)})
	plan, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	d := plan.Desired[0]
	if d.GetResourceVersion() != "" || d.GetUID() != "" || d.Object["status"] != nil {
		t.Errorf("system metadata and status were not stripped: %v", d.Object)
	}
	if got := d.GetLabels(); got["tier"] != "web" || got[ControllerUIDLabel] != parentUID {
		t.Errorf("labels %v, want tier and the controller-uid label", got)
	}
}

func TestComputeRejectsWhatPatchesBreak(t *testing.T) {
	for _, tc := range []struct {
		name        string
		generator   hookapi.Generator
		wantHook    string // an *InvalidResponseError of this hook, else any error
		wantProblem string
	}{
		{
			name:        "labels that no longer match the selector",
			generator:   mergePatching("ConfigMap", `{"metadata":{"labels":{"app":"q"}}}`),
			wantHook:    `patch:broken`,
			wantProblem: `child ConfigMap.v1 ns/a: its labels app=q do not match the parent's selector "app=p"`,
		},
		{
			name:        "labels that are not strings",
			generator:   mergePatching("ConfigMap", `{"metadata":{"labels":{"n":1}}}`),
			wantHook:    `patch:broken`,
			wantProblem: "metadata.labels must map strings to strings",
		},
		{
			name:        "a rename",
			generator:   mergePatching("ConfigMap", `{"metadata":{"name":"z"}}`),
			wantHook:    `patch:broken`,
			wantProblem: `the patch changes metadata.name: it is "a" and the patch sets it to "z"`,
		},
		{
			name: "an answer for a child that was not asked about",
			generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
				return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{UID: "new", PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(`{}`)}}}, nil
			}),
			wantHook:    `patch:broken`,
			wantProblem: `uid "new" is not the uid of a child of the request`,
		},
		{
			name:        "an unknown patchType",
			generator:   answeringType("ApplyPatch"),
			wantHook:    `patch:broken`,
			wantProblem: `patchType "ApplyPatch" is not supported`,
		},
		{
			name: "a failing generator",
			generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
				return nil, errors.New("HTTP 500")
			}),
			wantProblem: `patch "broken": HTTP 500`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := patchedInput(newController(withPatches("fine", "broken")), observedChildren(), returning(cm("a", "blue"), cm("b", "blue")),
				patches.Step{Name: "fine", Generator: mergePatching("ConfigMap", `{"data":{"fine":"yes"}}`)},
				patches.Step{Name: "broken", Generator: tc.generator})
			plan, err := Compute(context.Background(), in)
			if plan != nil {
				t.Fatalf("got a plan %v although a patch failed", summary(plan))
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantProblem) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantProblem)
			}
			if tc.wantHook == "" {
				return
			}
			var invalid *InvalidResponseError
			if !errors.As(err, &invalid) || invalid.Hook != tc.wantHook || invalid.Controller != "things" {
				t.Errorf("error %v is not an InvalidResponseError of the %s hook of things", err, tc.wantHook)
			}
		})
	}
}

func answeringType(patchType hookapi.PatchType) hookapi.Generator {
	return hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{UID: req.Items[0].UID, PatchType: patchType, Patch: json.RawMessage(`{}`)}}}, nil
	})
}

func TestComputeRefusesDeclaredPatchesItCanNotRun(t *testing.T) {
	in := newInput(newController(withPatches("missing")), newParent(), observedChildren(), returning(cm("a", "blue")))
	plan, err := Compute(context.Background(), in)
	if plan != nil || err == nil || !strings.Contains(err.Error(), "declares patches, but they are not available") {
		t.Errorf("Compute = %v, %v; want no plan and an error", plan, err)
	}
}

func TestComputeDoesNotPatchChildrenLeftToTheGarbageCollector(t *testing.T) {
	in := patchedInput(newController(withPatches("any")), observedChildren(), returning(cm("a", "blue")),
		patches.Step{Name: "any", Generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
			t.Error("a patch ran for a parent being deleted without a finalize hook")
			return nil, errors.New("must not run")
		})})
	in.Parent = deleting(newParent())
	if _, err := Compute(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func TestComputeValidatesWhatThePatchesLeaveAndBlamesTheFirstThatBrokeIt(t *testing.T) {
	breakLabels := mergePatching("ConfigMap", `{"metadata":{"labels":{"app":"q"}}}`)
	repairLabels := mergePatching("ConfigMap", `{"metadata":{"labels":{"app":"p"}}}`)
	addData := mergePatching("ConfigMap", `{"data":{"size":"L"}}`)

	// Broken and then repaired: what the patches leave is valid.
	in := patchedInput(newController(withPatches("break", "repair")), Claimed{}, returning(cm("a", "blue")),
		patches.Step{Name: "break", Generator: breakLabels},
		patches.Step{Name: "repair", Generator: repairLabels})
	if _, err := Compute(context.Background(), in); err != nil {
		t.Errorf("a child repaired by a later patch: %v", err)
	}

	// Broken, then changed but not repaired: the patch that broke it is
	// named, not the last one.
	in = patchedInput(newController(withPatches("fine", "break", "more")), Claimed{}, returning(cm("a", "blue")),
		patches.Step{Name: "fine", Generator: addData},
		patches.Step{Name: "break", Generator: breakLabels},
		patches.Step{Name: "more", Generator: mergePatching("ConfigMap", `{"data":{"shape":"round"}}`)})
	plan, err := Compute(context.Background(), in)
	var invalid *InvalidResponseError
	if plan != nil || !errors.As(err, &invalid) || invalid.Hook != `patch:break` {
		t.Errorf("Compute = %v, %v; want the break patch blamed", plan, err)
	}
}
