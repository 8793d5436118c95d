package patches_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
)

// A controller's inline patches (spec.hooks.patches[].inline) run over the
// children its sync hook answered, in order, before they are applied: here
// one that copies the parent's team label onto every ConfigMap.
func ExamplePipeline_Run() {
	team := "builtin.parent.metadata.labels.team"
	inline, err := patches.NewInline([]v1alpha1.PatchDefinition{{
		Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
		JSONPatches: []v1alpha1.JSONPatch{
			{Op: v1alpha1.JSONPatchOpAdd, Path: "/metadata/labels", ValueFrom: &v1alpha1.JSONPatchValue{Template: &labelsTemplate}},
			{Op: v1alpha1.JSONPatchOpAdd, Path: "/metadata/labels/team", ValueFrom: &v1alpha1.JSONPatchValue{Variable: &team}},
		},
	}})
	if err != nil {
		panic(err)
	}
	pipeline := patches.New(patches.Step{Name: "team-label", Generator: inline})

	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Site",
		"metadata": map[string]interface{}{"name": "web", "namespace": "default", "uid": "1", "labels": map[string]interface{}{"team": "blue"}},
	}}
	child := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "web-config"},
		"data":     map[string]interface{}{"color": "red"},
	}}
	res, err := pipeline.Run(context.Background(), patches.Input{Controller: "sites", Generation: 1, Parent: parent, Children: []*unstructured.Unstructured{child}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Children[0].GetLabels())
	fmt.Println(child.GetLabels() == nil) // the input is not modified
	// Output:
	// map[app:web team:blue]
	// true
}

var labelsTemplate = `{"app": "{{ .builtin.parent.metadata.name }}"}`
