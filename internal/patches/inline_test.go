package patches

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// TestInlinePatchesApplyAsTheirJSONPatchWould: the pipeline applies inline
// patches in the process; the result, or the failure, must be the one
// evanphx/json-patch gives for the JSON patch they answer as a Generator
// (which is how a patch hook's answer is applied).
func TestInlinePatchesApplyAsTheirJSONPatchWould(t *testing.T) {
	child := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]interface{}{"name": "web", "namespace": "ns", "labels": map[string]interface{}{"app": "web"}},
			"spec": map[string]interface{}{
				"replicas": int64(1),
				"template": map[string]interface{}{"spec": map[string]interface{}{
					"containers": []interface{}{
						map[string]interface{}{"name": "a", "args": []interface{}{"x", "y"}},
						map[string]interface{}{"name": "b"},
					},
				}},
				"matrix": []interface{}{[]interface{}{int64(1), int64(2)}, []interface{}{int64(3)}},
			},
		}}
	}
	raw := func(s string) *v1alpha1.JSON { return &v1alpha1.JSON{Raw: []byte(s)} }
	str := func(s string) *string { return &s }
	op := func(o v1alpha1.JSONPatchOp, path string, value *v1alpha1.JSON) v1alpha1.JSONPatch {
		return v1alpha1.JSONPatch{Op: o, Path: path, Value: value}
	}
	add, replace, remove := v1alpha1.JSONPatchOpAdd, v1alpha1.JSONPatchOpReplace, v1alpha1.JSONPatchOpRemove
	for _, tc := range []struct {
		name string
		ops  []v1alpha1.JSONPatch
		// v4Lenient marks an operation RFC 6902 refuses but
		// gopkg.in/evanphx/json-patch.v4 applies: a replace of a missing
		// object member adds it there (v5 refuses it too). Inline patches
		// follow the RFC.
		v4Lenient bool
	}{
		{name: "add a member", ops: []v1alpha1.JSONPatch{op(add, "/metadata/labels/tier", raw(`"web"`))}},
		{name: "add replaces a member", ops: []v1alpha1.JSONPatch{op(add, "/spec/replicas", raw(`3`))}},
		{name: "add an object", ops: []v1alpha1.JSONPatch{op(add, "/spec/strategy", raw(`{"type":"Recreate","n":1.5}`))}},
		{name: "add into a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/1", raw(`{"name":"c"}`))}},
		{name: "add at the end of a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/-", raw(`{"name":"c"}`))}},
		{name: "add at the length of a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/2", raw(`{"name":"c"}`))}},
		{name: "add into a nested list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/0/args/0", raw(`"first"`))}},
		{name: "add into a list in a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/matrix/1/-", raw(`4`))}},
		{name: "add with an escaped key", ops: []v1alpha1.JSONPatch{op(add, "/metadata/labels/app.kubernetes.io~1name", raw(`"web"`)), op(add, "/metadata/labels/a~0b", raw(`"x"`))}},
		{name: "replace a member", ops: []v1alpha1.JSONPatch{op(replace, "/spec/replicas", raw(`5`))}},
		{name: "replace a list element", ops: []v1alpha1.JSONPatch{op(replace, "/spec/template/spec/containers/0/args/1", raw(`"z"`))}},
		{name: "replace a whole list", ops: []v1alpha1.JSONPatch{op(replace, "/spec/matrix", raw(`[]`))}},
		{name: "remove a member", ops: []v1alpha1.JSONPatch{op(remove, "/metadata/labels/app", nil)}},
		{name: "remove a list element", ops: []v1alpha1.JSONPatch{op(remove, "/spec/template/spec/containers/0", nil)}},
		{name: "remove from a list in a list", ops: []v1alpha1.JSONPatch{op(remove, "/spec/matrix/0/1", nil)}},
		{name: "several operations see each other", ops: []v1alpha1.JSONPatch{
			op(add, "/spec/strategy", raw(`{}`)), op(add, "/spec/strategy/type", raw(`"Recreate"`)), op(remove, "/spec/strategy/type", nil),
		}},
		{name: "a value from a variable", ops: []v1alpha1.JSONPatch{{Op: add, Path: "/spec/replicas", ValueFrom: &v1alpha1.JSONPatchValue{Variable: str("builtin.parent.spec.replicas")}}}},
		{name: "a value from a template", ops: []v1alpha1.JSONPatch{{Op: add, Path: "/metadata/labels/owner", ValueFrom: &v1alpha1.JSONPatchValue{Template: str(`"{{ .builtin.child.name }}"`)}}}},
		// Failures: both must fail.
		{name: "add under a missing member", ops: []v1alpha1.JSONPatch{op(add, "/metadata/annotations/a", raw(`"x"`))}},
		{name: "replace a missing member", ops: []v1alpha1.JSONPatch{op(replace, "/spec/paused", raw(`true`))}, v4Lenient: true},
		{name: "remove a missing member", ops: []v1alpha1.JSONPatch{op(remove, "/spec/paused", nil)}},
		{name: "add beyond the end of a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/3", raw(`{}`))}},
		{name: "replace beyond the end of a list", ops: []v1alpha1.JSONPatch{op(replace, "/spec/template/spec/containers/2", raw(`{}`))}},
		{name: "remove beyond the end of a list", ops: []v1alpha1.JSONPatch{op(remove, "/spec/matrix/2", nil)}},
		{name: "a key of a list", ops: []v1alpha1.JSONPatch{op(add, "/spec/template/spec/containers/name", raw(`"x"`))}},
		{name: "below a scalar", ops: []v1alpha1.JSONPatch{op(add, "/spec/replicas/x", raw(`1`))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen, err := NewInline([]v1alpha1.PatchDefinition{{Selector: v1alpha1.PatchSelector{APIVersion: "apps/v1", Kind: "Deployment"}, JSONPatches: tc.ops}})
			if err != nil {
				t.Fatal(err)
			}
			in := input(child())
			native, nativeErr := New(Step{Name: "p", Generator: gen}).Run(context.Background(), in)
			// The same generator behind GeneratorFunc: the pipeline sends
			// it a request and applies its JSON answer with evanphx.
			asJSON, jsonErr := New(Step{Name: "p", Generator: hookapi.GeneratorFunc(gen.Generate)}).Run(context.Background(), in)
			if tc.v4Lenient {
				if nativeErr == nil {
					t.Errorf("in the process: no error; RFC 6902 refuses this")
				}
				return
			}
			if (nativeErr == nil) != (jsonErr == nil) {
				t.Fatalf("in the process: %v; as JSON: %v", nativeErr, jsonErr)
			}
			if nativeErr != nil {
				return
			}
			if !reflect.DeepEqual(native.Children[0].Object, asJSON.Children[0].Object) {
				t.Errorf("in the process:\n%v\nas JSON:\n%v", native.Children[0].Object, asJSON.Children[0].Object)
			}
			if !reflect.DeepEqual(native.Steps[0].Changes, asJSON.Steps[0].Changes) {
				t.Errorf("changes in the process %q, as JSON %q", native.Steps[0].Changes, asJSON.Steps[0].Changes)
			}
			if !reflect.DeepEqual(in.Children[0].Object, child().Object) {
				t.Errorf("the input child was modified: %v", in.Children[0].Object)
			}
		})
	}
}

// TestInlineValuesAreNotShared: a value set on several children is a copy
// each, so that a later patch changing it in one changes it in no other.
func TestInlineValuesAreNotShared(t *testing.T) {
	gen, err := NewInline([]v1alpha1.PatchDefinition{{
		Selector:    v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
		JSONPatches: []v1alpha1.JSONPatch{{Op: v1alpha1.JSONPatchOpAdd, Path: "/data", Value: &v1alpha1.JSON{Raw: []byte(`{"k":"v"}`)}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	only := func(name string) hookapi.Generator {
		return hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
			for _, item := range req.Items {
				if item.Ref.Name == name {
					return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: []byte(`{"data":{"k":"changed"}}`)}}}, nil
				}
			}
			return &hookapi.GenerateResponse{}, nil
		})
	}
	res, err := New(Step{Name: "data", Generator: gen}, Step{Name: "one", Generator: only("p-a")}).Run(context.Background(), input(configMap("p-a", nil), configMap("p-b", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := data(res.Children[1]); got["k"] != "v" {
		t.Errorf("p-b data %v: changing p-a's changed it", got)
	}
}
