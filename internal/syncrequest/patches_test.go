package syncrequest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// patchedController's sync hook answers n ConfigMaps p-0..p-<n-1>; its
// patches are given.
func patchedController(t testing.TB, n int, patches ...v1alpha1.PatchHook) *v1alpha1.CompositeController {
	var children []interface{}
	for i := 0; i < n; i++ {
		children = append(children, map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("p-%d", i), "labels": map[string]interface{}{"app": "p"}},
			"data":     map[string]interface{}{"color": "blue", "item": fmt.Sprint(i)},
		})
	}
	answer, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"ok": true}, "children": children})
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(hook.Close)
	cc := definitiontest.ConfigMapController("patched", "0e7c1f1e-0000-4000-8000-0000000000cd", hook.URL+"/sync")
	cc.Generation = 3
	cc.Spec.Hooks.Patches = patches
	return cc
}

// twoInlinePatches label every child with the parent's color and set the
// item's owner from a template.
func twoInlinePatches() []v1alpha1.PatchHook {
	return []v1alpha1.PatchHook{
		{Name: "color-label", Definitions: []v1alpha1.PatchDefinition{{
			Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
			JSONPatches: []v1alpha1.JSONPatch{{Op: v1alpha1.JSONPatchOpAdd, Path: "/metadata/labels/color",
				ValueFrom: &v1alpha1.JSONPatchValue{Variable: ptr.To("builtin.parent.spec.color")}}},
		}}},
		{Name: "owner", Definitions: []v1alpha1.PatchDefinition{{
			Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
			JSONPatches: []v1alpha1.JSONPatch{{Op: v1alpha1.JSONPatchOpAdd, Path: "/data/owner",
				ValueFrom: &v1alpha1.JSONPatchValue{Template: ptr.To(`"{{ .builtin.parent.metadata.name }}/{{ .builtin.child.name }}"`)}}},
		}}},
	}
}

var inlineParent = &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{
	Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","namespace":"default"},"spec":{"color":"green"}}`),
}}}

func TestPreviewShowsEachPatchStep(t *testing.T) {
	stamp := httptest.NewServer(hookapi.PatchHandler(hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		// Sees the first patch's label.
		color := req.Items[0].Object.GetLabels()["color"]
		return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{
			UID: req.Items[0].UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(`{"data":{"stamp":"` + color + `"}}`),
		}}}, nil
	})))
	defer stamp.Close()
	patches := append(twoInlinePatches()[:1],
		v1alpha1.PatchHook{Name: "never", EnabledIf: ptr.To(`builtin.parent.spec.color == "red"`), Webhook: &v1alpha1.Webhook{URL: ptr.To("http://127.0.0.1:1/never")}},
		v1alpha1.PatchHook{Name: "stamp", Webhook: &v1alpha1.Webhook{URL: ptr.To(stamp.URL)}},
	)
	cc := patchedController(t, 2, patches...)
	st, err := NewRunner(context.Background(), nil, nil, hooks.Destinations{}).Run(context.Background(), cc, inlineParent, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Patches) != 3 {
		t.Fatalf("patches %+v, want 3 steps", st.Patches)
	}
	label, never, stamped := st.Patches[0], st.Patches[1], st.Patches[2]
	// An inline patch is applied in the process: no request was sent.
	if label.Name != "color-label" || label.Skipped || label.Request != nil || len(label.Changes) != 2 {
		t.Errorf("color-label step %+v", label)
	}
	wantChange := v1alpha1.SyncPatchChange{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "p-0", Diff: []string{`metadata.labels.color: <none> -> "green"`}}
	if !reflect.DeepEqual(label.Changes[0], wantChange) {
		t.Errorf("color-label change %+v, want %+v", label.Changes[0], wantChange)
	}
	if !never.Skipped || never.Request != nil || never.Reason != `enabledIf is false: builtin.parent.spec.color == "red"` {
		t.Errorf("never step %+v, want skipped with its enabledIf", never)
	}
	if !reflect.DeepEqual(stamped.Changes, []v1alpha1.SyncPatchChange{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "p-0", Diff: []string{`data.stamp: <none> -> "green"`}}}) {
		t.Errorf("stamp changes %+v", stamped.Changes)
	}
	// The request is the exact one the patch hook got: the first patch's
	// result, and the variables.
	var req hookapi.GenerateRequest
	if err := json.Unmarshal(stamped.Request.Raw, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Items) != 2 || req.Items[0].Object.GetLabels()["color"] != "green" || req.Variables.Builtin.Controller.Generation != 3 ||
		req.Variables.Builtin.Parent.Spec["color"] != "green" || req.Items[1].Variables.Builtin.Child.Name != "p-1" {
		t.Errorf("stamp's request %s", stamped.Request.Raw)
	}
	// The children and the plan are the patched ones.
	var child map[string]interface{}
	if err := json.Unmarshal(st.Children[0].Raw, &child); err != nil {
		t.Fatal(err)
	}
	if data := child["data"].(map[string]interface{}); data["stamp"] != "green" {
		t.Errorf("previewed child %v lacks the stamp", child)
	}
}

func TestPreviewOfAFailingPatchSaysWhich(t *testing.T) {
	patches := twoInlinePatches()
	patches[0].Definitions[0].JSONPatches[0].ValueFrom.Variable = ptr.To("builtin.parent.spec.size")
	_, err := NewRunner(context.Background(), nil, nil, hooks.Destinations{}).Run(context.Background(), patchedController(t, 1, patches...), inlineParent, true)
	want := `patch "color-label": child ConfigMap.v1 default/p-0: definitions[0].jsonPatches[0] (add /metadata/labels/color): valueFrom.variable builtin.parent.spec.size is not set`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// BenchmarkRunInlinePreviewWithTwoPatches is BenchmarkRunInlinePreview with
// two inline patches over the 10 children: what the pipeline adds to a
// preview.
func BenchmarkRunInlinePreviewWithTwoPatches(b *testing.B) {
	cc := patchedController(b, 10, twoInlinePatches()...)
	ctx := context.Background()
	r := NewRunner(ctx, nil, nil, hooks.Destinations{})
	b.ReportAllocs()
	for b.Loop() {
		st, err := r.Run(ctx, cc, inlineParent, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Children) != 10 || len(st.Patches) != 2 {
			b.Fatalf("%d children, %d patches: %q", len(st.Children), len(st.Patches), st.Warnings)
		}
	}
}
