package patches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func parent() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]interface{}{"name": "p", "namespace": "ns", "labels": map[string]interface{}{"team": "blue"}},
		"spec":     map[string]interface{}{"replicas": int64(3), "color": "red"},
	}}
}

func configMap(name string, data map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": "ns", "labels": map[string]interface{}{"app": "p"}},
		"data":     data,
	}}
}

func deployment(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{"name": name, "namespace": "ns"},
		"spec":     map[string]interface{}{"replicas": int64(1)},
	}}
}

func input(children ...*unstructured.Unstructured) Input {
	return Input{Controller: "things", Generation: 4, Parent: parent(), Children: children}
}

// patching answers the same patch for every item.
func patching(patchType hookapi.PatchType, patch string) hookapi.Generator {
	return hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: patchType, Patch: json.RawMessage(patch)})
		}
		return resp, nil
	})
}

// answering answers resp whatever it is asked.
func answering(resp *hookapi.GenerateResponse) hookapi.Generator {
	return hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		return resp, nil
	})
}

func condition(t *testing.T, expr string) *variables.Condition {
	t.Helper()
	c, err := variables.CompileCondition(expr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func data(obj *unstructured.Unstructured) map[string]interface{} {
	m, _, _ := unstructured.NestedMap(obj.Object, "data")
	return m
}

func TestPatchesApplyInOrderEachSeeingThePreviousResult(t *testing.T) {
	var secondSaw map[string]interface{}
	p := New(
		Step{Name: "json-patch", Generator: patching(hookapi.PatchTypeJSONPatch,
			`[{"op":"add","path":"/data/size","value":"L"},{"op":"replace","path":"/data/color","value":"green"}]`)},
		Step{Name: "merge-patch", Generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
			// Computed from what the first patch left: size is there.
			secondSaw = data(req.Items[0].Object)
			size, _, _ := unstructured.NestedString(req.Items[0].Object.Object, "data", "size")
			patch := fmt.Sprintf(`{"data":{"size":%q,"color":null,"shape":"round"}}`, size+"L")
			return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{
				{UID: req.Items[0].UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(patch)},
			}}, nil
		})},
	)
	in := input(configMap("p-a", map[string]interface{}{"color": "blue"}))
	res, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]interface{}{"color": "green", "size": "L"}; !reflect.DeepEqual(secondSaw, want) {
		t.Errorf("the second patch saw %v, want the first's result %v", secondSaw, want)
	}
	if got, want := data(res.Children[0]), map[string]interface{}{"size": "LL", "shape": "round"}; !reflect.DeepEqual(got, want) {
		t.Errorf("patched data %v, want %v", got, want)
	}
	if got := data(in.Children[0]); !reflect.DeepEqual(got, map[string]interface{}{"color": "blue"}) {
		t.Errorf("the input child was modified: %v", got)
	}
	if len(res.Steps) != 2 {
		t.Fatalf("steps %+v, want 2", res.Steps)
	}
	wantDiffs := [][]string{
		{`data.color: "blue" -> "green"`, `data.size: <none> -> "L"`},
		{`- data.color: "green"`, `data.shape: <none> -> "round"`, `data.size: "L" -> "LL"`},
	}
	for i, s := range res.Steps {
		if s.Skipped || s.Request == nil || len(s.Changes) != 1 {
			t.Fatalf("step %d: %+v, want one change and its request", i, s)
		}
		if s.Changes[0].Ref.Name != "p-a" || !reflect.DeepEqual(s.Changes[0].Diff, wantDiffs[i]) {
			t.Errorf("step %s changes %+v, want p-a %q", s.Name, s.Changes, wantDiffs[i])
		}
	}
}

func TestEnabledIfDecidesPerParent(t *testing.T) {
	called := 0
	counting := hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		called++
		return &hookapi.GenerateResponse{}, nil
	})
	p := New(
		Step{Name: "off", EnabledIf: condition(t, `builtin.parent.spec.replicas > 5`), Generator: counting},
		Step{Name: "on", EnabledIf: condition(t, `builtin.parent.metadata.labels.team == "blue" && builtin.controller.generation == 4`), Generator: counting},
	)
	res, err := p.Run(context.Background(), input(configMap("p-a", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if called != 1 {
		t.Errorf("generators called %d times, want once (only the enabled one)", called)
	}
	off, on := res.Steps[0], res.Steps[1]
	if !off.Skipped || off.Request != nil || !strings.Contains(off.Reason, "enabledIf is false: builtin.parent.spec.replicas > 5") {
		t.Errorf("disabled step %+v, want skipped with its expression as reason", off)
	}
	if on.Skipped || on.Request == nil {
		t.Errorf("enabled step %+v, want run", on)
	}
}

func TestEnabledIfThatCanNotBeEvaluatedFails(t *testing.T) {
	p := New(Step{Name: "size", EnabledIf: condition(t, `builtin.parent.spec.size > 1`), Generator: answering(&hookapi.GenerateResponse{})})
	res, err := p.Run(context.Background(), input(configMap("p-a", nil)))
	var step *StepError
	if res != nil || !errors.As(err, &step) || step.Patch != "size" || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("Run = %v, %v; want a StepError of patch size saying no such key", res, err)
	}
}

func TestTheRequestCarriesVariablesAndCopies(t *testing.T) {
	var got *hookapi.GenerateRequest
	p := New(Step{Name: "look", Generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		got = req
		// A generator that scribbles over its request changes nothing.
		req.Items[0].Object.Object["data"] = map[string]interface{}{"scribbled": "yes"}
		req.Variables.Builtin.Parent.Spec["replicas"] = int64(100)
		return &hookapi.GenerateResponse{}, nil
	})})
	in := input(configMap("p-a", map[string]interface{}{"color": "blue"}), deployment("web"))
	res, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 {
		t.Fatalf("items %d, want 2", len(got.Items))
	}
	data, err := json.Marshal(got.Variables)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"builtin":{"controller":{"name":"things","generation":4},"parent":{"apiVersion":"example.com/v1","kind":"Thing",` +
		`"metadata":{"name":"p","namespace":"ns","labels":{"team":"blue"},"annotations":{}},"spec":{"color":"red","replicas":100}}}}`
	if string(data) != want {
		t.Errorf("variables\n got %s\nwant %s", data, want)
	}
	item := got.Items[1]
	wantRef := hookapi.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	if item.Ref != wantRef || item.UID != UID(wantRef) || *item.Variables.Builtin.Child != wantRef || item.Object.GetName() != "web" {
		t.Errorf("item %+v, want the Deployment with its ref as uid source and builtin.child", item)
	}
	if got.Items[0].UID == got.Items[1].UID {
		t.Errorf("two children share uid %s", got.Items[0].UID)
	}
	if d := res.Children[0].Object["data"]; !reflect.DeepEqual(d, map[string]interface{}{"color": "blue"}) {
		t.Errorf("the result took the generator's scribbles: %v", d)
	}
	if r := in.Parent.Object["spec"].(map[string]interface{})["replicas"]; r != int64(3) {
		t.Errorf("the parent took the generator's scribbles: replicas %v", r)
	}
}

func TestNoChildrenNoCall(t *testing.T) {
	p := New(Step{Name: "any", Generator: hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		t.Error("a generator was called without children")
		return nil, nil
	})})
	res, err := p.Run(context.Background(), input())
	if err != nil || len(res.Steps) != 1 || !res.Steps[0].Skipped {
		t.Errorf("Run = %+v, %v; want the step skipped", res, err)
	}
}

func TestInvalidAnswersFailTheRun(t *testing.T) {
	a := configMap("p-a", map[string]interface{}{"color": "blue"})
	uidA := UID(refOf(a))
	item := func(patchType hookapi.PatchType, patch string) hookapi.GenerateResponseItem {
		return hookapi.GenerateResponseItem{UID: uidA, PatchType: patchType, Patch: json.RawMessage(patch)}
	}
	for _, tc := range []struct {
		name string
		gen  hookapi.Generator
		want string
	}{
		{"no response", answering(nil), "the generator returned no response"},
		{"generator error", hookapi.GeneratorFunc(func(context.Context, *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
			return nil, errors.New("on fire")
		}), "on fire"},
		{"unknown uid", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{UID: "nope", PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(`{}`)}}}),
			`items[0]: uid "nope" is not the uid of a child of the request; a patch can't add children`},
		{"duplicate uid", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{
			item(hookapi.PatchTypeJSONMergePatch, `{"data":{"a":"1"}}`), item(hookapi.PatchTypeJSONMergePatch, `{"data":{"b":"2"}}`)}}),
			`items[1] (ConfigMap.v1 ns/p-a): uid "` + uidA + `" is answered again, after items[0]`},
		{"unknown patchType", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{item("StrategicMergePatch", `{}`)}}),
			`patchType "StrategicMergePatch" is not supported: must be JSONPatch or JSONMergePatch`},
		{"no patchType", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{item("", `{}`)}}), "has no patchType"},
		{"no patch", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{item(hookapi.PatchTypeJSONPatch, ``)}}), "has no patch"},
		{"null patch", answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{item(hookapi.PatchTypeJSONMergePatch, `null`)}}), "has no patch"},
		{"JSONPatch that is not one", patching(hookapi.PatchTypeJSONPatch, `{"op":"add"}`), "is not an RFC 6902 JSON patch"},
		{"JSONPatch that does not apply", patching(hookapi.PatchTypeJSONPatch, `[{"op":"replace","path":"/spec/replicas","value":2}]`), "its JSONPatch does not apply"},
		{"JSONMergePatch that is not an object", patching(hookapi.PatchTypeJSONMergePatch, `["x"]`), "is not a JSON object"},
		{"rename", patching(hookapi.PatchTypeJSONMergePatch, `{"metadata":{"name":"p-b"}}`),
			`the patch changes metadata.name: it is "p-a" and the patch sets it to "p-b"`},
		{"removing the name", patching(hookapi.PatchTypeJSONPatch, `[{"op":"remove","path":"/metadata/name"}]`),
			`the patch changes metadata.name: it is "p-a" and the patch removes it`},
		{"another namespace", patching(hookapi.PatchTypeJSONPatch, `[{"op":"replace","path":"/metadata/namespace","value":"kube-system"}]`),
			`the patch changes metadata.namespace: it is "ns" and the patch sets it to "kube-system"`},
		{"another kind", patching(hookapi.PatchTypeJSONMergePatch, `{"kind":"Secret"}`), `the patch changes kind`},
		{"another apiVersion", patching(hookapi.PatchTypeJSONMergePatch, `{"apiVersion":"v2"}`), `the patch changes apiVersion`},
		{"a name that is not a string", patching(hookapi.PatchTypeJSONMergePatch, `{"metadata":{"name":3}}`), `sets it to 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A first patch that works: its result must not come out either.
			p := New(
				Step{Name: "fine", Generator: patching(hookapi.PatchTypeJSONMergePatch, `{"data":{"fine":"yes"}}`)},
				Step{Name: "broken", Generator: tc.gen},
			)
			in := input(a, deployment("web"))
			res, err := p.Run(context.Background(), in)
			if res != nil {
				t.Fatalf("got a result %+v for a failing patch", res)
			}
			var step *StepError
			if !errors.As(err, &step) || step.Patch != "broken" {
				t.Fatalf("error %v is not a StepError of patch broken", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `patch "broken": `) {
				t.Errorf("error %q does not start with the patch and say %q", err, tc.want)
			}
			if got := data(a); !reflect.DeepEqual(got, map[string]interface{}{"color": "blue"}) {
				t.Errorf("the input child was modified: %v", got)
			}
		})
	}
}

func TestEveryProblemOfAnAnswerIsReported(t *testing.T) {
	a, b := configMap("p-a", nil), configMap("p-b", nil)
	p := New(Step{Name: "bad", Generator: answering(&hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{
		{UID: UID(refOf(a)), PatchType: hookapi.PatchTypeJSONMergePatch, Patch: json.RawMessage(`{"metadata":{"name":"x"}}`)},
		{UID: UID(refOf(b)), PatchType: "Other", Patch: json.RawMessage(`{}`)},
		{UID: "ghost", PatchType: hookapi.PatchTypeJSONPatch, Patch: json.RawMessage(`[]`)},
	}})})
	_, err := p.Run(context.Background(), input(a, b))
	var invalid *InvalidAnswerError
	if !errors.As(err, &invalid) || len(invalid.Problems) != 3 {
		t.Fatalf("error %v, want an InvalidAnswerError with 3 problems", err)
	}
	for i, want := range []string{"ConfigMap.v1 ns/p-a", "ConfigMap.v1 ns/p-b", `"ghost"`} {
		if !strings.Contains(invalid.Problems[i], want) {
			t.Errorf("problem %d %q does not name %s", i, invalid.Problems[i], want)
		}
	}
}

func TestInlinePatches(t *testing.T) {
	str := func(s string) *string { return &s }
	raw := func(s string) *v1alpha1.JSON { return &v1alpha1.JSON{Raw: []byte(s)} }
	gen, err := NewInline([]v1alpha1.PatchDefinition{
		{
			Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
			JSONPatches: []v1alpha1.JSONPatch{
				{Op: v1alpha1.JSONPatchOpAdd, Path: "/metadata/labels/team", ValueFrom: &v1alpha1.JSONPatchValue{Variable: str("builtin.parent.metadata.labels.team")}},
				{Op: v1alpha1.JSONPatchOpAdd, Path: "/data/owner", ValueFrom: &v1alpha1.JSONPatchValue{Template: str(`"{{ .builtin.controller.name }}/{{ .builtin.child.name }}"`)}},
				{Op: v1alpha1.JSONPatchOpRemove, Path: "/data/color"},
			},
		},
		{
			// Only the Deployment named web.
			Selector: v1alpha1.PatchSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			JSONPatches: []v1alpha1.JSONPatch{
				{Op: v1alpha1.JSONPatchOpReplace, Path: "/spec/replicas", ValueFrom: &v1alpha1.JSONPatchValue{Variable: str("builtin.parent.spec.replicas")}},
				{Op: v1alpha1.JSONPatchOpAdd, Path: "/spec/strategy", Value: raw(`{"type":"Recreate"}`)},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Step{Name: "inline", Generator: gen})
	res, err := p.Run(context.Background(), input(configMap("p-a", map[string]interface{}{"color": "blue"}), deployment("web"), deployment("db")))
	if err != nil {
		t.Fatal(err)
	}
	cm, web, db := res.Children[0], res.Children[1], res.Children[2]
	if got := cm.GetLabels(); !reflect.DeepEqual(got, map[string]string{"app": "p", "team": "blue"}) {
		t.Errorf("ConfigMap labels %v, want team from the parent's label", got)
	}
	if got := data(cm); !reflect.DeepEqual(got, map[string]interface{}{"owner": "things/p-a"}) {
		t.Errorf("ConfigMap data %v, want owner from the template and color removed", got)
	}
	if got := web.Object["spec"]; !reflect.DeepEqual(got, map[string]interface{}{"replicas": int64(3), "strategy": map[string]interface{}{"type": "Recreate"}}) {
		t.Errorf("web spec %v, want the parent's replicas (an integer) and the strategy", got)
	}
	if !reflect.DeepEqual(db.Object, deployment("db").Object) {
		t.Errorf("db, which no selector matches, changed: %v", db.Object)
	}
	if len(res.Steps[0].Changes) != 2 {
		t.Errorf("changes %+v, want the ConfigMap's and web's", res.Steps[0].Changes)
	}
}

func TestInlinePatchWithAnUnsetVariableFails(t *testing.T) {
	str := func(s string) *string { return &s }
	gen, err := NewInline([]v1alpha1.PatchDefinition{{
		Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
		JSONPatches: []v1alpha1.JSONPatch{
			{Op: v1alpha1.JSONPatchOpAdd, Path: "/data/size", ValueFrom: &v1alpha1.JSONPatchValue{Variable: str("builtin.parent.spec.size")}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Step{Name: "size", Generator: gen}).Run(context.Background(), input(configMap("p-a", nil)))
	want := `patch "size": child ConfigMap.v1 ns/p-a: definitions[0].jsonPatches[0] (add /data/size): valueFrom.variable builtin.parent.spec.size is not set`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

func TestDiff(t *testing.T) {
	before := map[string]interface{}{
		"metadata": map[string]interface{}{"labels": map[string]interface{}{"a": "1"}},
		"spec":     map[string]interface{}{"replicas": int64(1), "ports": []interface{}{map[string]interface{}{"port": int64(80)}}, "args": []interface{}{"a"}},
	}
	after := map[string]interface{}{
		"metadata": map[string]interface{}{"labels": map[string]interface{}{"app.kubernetes.io/name": "x"}},
		"spec":     map[string]interface{}{"replicas": float64(1), "ports": []interface{}{map[string]interface{}{"port": int64(8080)}}, "args": []interface{}{"a", "b"}},
		"data":     map[string]interface{}{"k": "v"},
	}
	want := []string{
		`data: <none> -> {"k":"v"}`,
		`- metadata.labels.a: "1"`,
		`metadata.labels["app.kubernetes.io/name"]: <none> -> "x"`,
		`spec.args: ["a"] -> ["a","b"]`,
		`spec.ports[0].port: 80 -> 8080`,
	}
	if got := Diff(before, after); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got %q\nwant %q", got, want)
	}
}

// TestDiffWithinIsDiff: where before and after differ only within the
// given subtrees, DiffWithin says what Diff says, without walking the rest.
func TestDiffWithinIsDiff(t *testing.T) {
	before := map[string]interface{}{
		"metadata": map[string]interface{}{"name": "a", "labels": map[string]interface{}{"a": "1", "b": "2"}},
		"spec": map[string]interface{}{
			"ports": []interface{}{map[string]interface{}{"port": int64(80)}, map[string]interface{}{"port": int64(81)}},
			"args":  []interface{}{"a"},
			"same":  map[string]interface{}{"x": int64(1)},
		},
	}
	after := map[string]interface{}{
		"metadata": map[string]interface{}{"name": "a", "labels": map[string]interface{}{"a": "1", "c": "3"}},
		"spec": map[string]interface{}{
			"ports": []interface{}{map[string]interface{}{"port": int64(80)}, map[string]interface{}{"port": int64(8081)}},
			"args":  []interface{}{"a", "b"},
			"same":  map[string]interface{}{"x": int64(1)},
			"new":   true,
		},
	}
	roots := []pointer{
		{"metadata", "labels", "b"}, {"metadata", "labels", "c"},
		{"spec", "ports", "1", "port"}, {"spec", "args"}, {"spec", "new"},
		{"spec", "missing", "deep"}, {"spec", "ports", "7"},
	}
	want := Diff(before, after)
	if len(want) != 5 {
		t.Fatalf("Diff found %q, want 5 lines", want)
	}
	if got := DiffWithin(before, after, roots); !reflect.DeepEqual(got, want) {
		t.Errorf("DiffWithin:\n got %q\nwant %q", got, want)
	}
	// Outside the roots nothing is looked at.
	if got := DiffWithin(before, after, []pointer{{"spec", "same"}}); len(got) != 0 {
		t.Errorf("DiffWithin of an unchanged subtree: %q", got)
	}
}
