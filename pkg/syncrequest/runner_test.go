package syncrequest

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi/openapitest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/pkg/target"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(name string, data map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": "default", "labels": map[string]interface{}{"app": "p"}},
		"data":     data,
	}}
}

// stored is desired as an earlier apply of manager stored it.
func stored(t *testing.T, desired *unstructured.Unstructured, manager string, refs []metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	obj, _, err := deducedSchemas.WouldStore(nil, engine.WithOwnerReferences(desired, refs), manager)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetUID("0e7c1f1e-0000-4000-8000-00000000000a")
	obj.SetResourceVersion("7")
	return obj
}

func TestWouldStoreComputesEachChildLocally(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	manager := definition.FieldManager(cc.Name)
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
	}}
	refs := []metav1.OwnerReference{engine.ControllerRef(parent)}

	created := configMap("p-new", map[string]interface{}{"color": "blue"})
	updated := configMap("p-updated", map[string]interface{}{"color": "green"})
	updatedLive := stored(t, configMap("p-updated", map[string]interface{}{"color": "red", "dropped": "x"}), manager, refs)
	recreated := configMap("p-recreated", map[string]interface{}{"color": "blue"})
	recreatedLive := stored(t, configMap("p-recreated", map[string]interface{}{"color": "red", "old": "x"}), manager, refs)
	// Last written by Metacontroller, whose "dropped" the takeover hands
	// to us, so that the apply prunes it.
	takenLive := stored(t, configMap("p-taken", map[string]interface{}{"color": "blue", "dropped": "x"}), fieldowner.MetacontrollerManager, refs)
	taken := configMap("p-taken", map[string]interface{}{"color": "blue"})
	patch, needed, err := deducedSchemas.TakeoverPatch(takenLive, manager)
	if err != nil || !needed {
		t.Fatalf("TakeoverPatch: %v, needed %v", err, needed)
	}
	gone := stored(t, configMap("p-gone", nil), manager, refs)

	plan := &engine.Plan{Items: []engine.Item{
		{Action: v1alpha1.SyncActionCreate, GVR: configMaps, Desired: created},
		{Action: v1alpha1.SyncActionUpdate, GVR: configMaps, Desired: updated, Observed: updatedLive},
		{Action: v1alpha1.SyncActionRecreate, GVR: configMaps, Desired: recreated, Observed: recreatedLive},
		{Action: v1alpha1.SyncActionUnchanged, GVR: configMaps, Desired: taken, Observed: takenLive, Takeover: patch},
		{Action: v1alpha1.SyncActionDelete, GVR: configMaps, Observed: gone},
	}}
	before := []*unstructured.Unstructured{created.DeepCopy(), updated.DeepCopy(), updatedLive.DeepCopy(), takenLive.DeepCopy()}

	r := &Runner{}
	out, warnings := r.wouldStore(definitiontest.Compile(t, cc), parent, plan, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	if len(out) != 4 {
		t.Fatalf("%d children, want 4 (the deleted one is not stored)", len(out))
	}
	for i, obj := range out {
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != parent.GetUID() {
			t.Errorf("child %d: ownerReferences %v, want the parent's", i, refs)
		}
		var ownedByUs bool
		for _, e := range obj.GetManagedFields() {
			ownedByUs = ownedByUs || (e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply)
		}
		if !ownedByUs {
			t.Errorf("child %s: no Apply entry of %s in %v", obj.GetName(), manager, obj.GetManagedFields())
		}
	}
	want := []map[string]interface{}{
		{"color": "blue"},
		// The field the hook dropped is pruned.
		{"color": "green"},
		// Recreated: created anew, nothing of the old one.
		{"color": "blue"},
		// Taken over, then pruned.
		{"color": "blue"},
	}
	for i, obj := range out {
		data, _, _ := unstructured.NestedMap(obj.Object, "data")
		if !reflect.DeepEqual(data, want[i]) {
			t.Errorf("child %s: data %v, want %v", obj.GetName(), data, want[i])
		}
	}
	if out[1].GetResourceVersion() != "7" || out[2].GetResourceVersion() != "" {
		t.Errorf("resourceVersions %q %q, want the live 7 for an update and none for a recreate", out[1].GetResourceVersion(), out[2].GetResourceVersion())
	}
	for i, obj := range []*unstructured.Unstructured{created, updated, updatedLive, takenLive} {
		if !reflect.DeepEqual(obj, before[i]) {
			t.Errorf("the preview changed the plan's object %s", obj.GetName())
		}
	}
}

func TestWouldStoreWithoutParentUID(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello", "metadata": map[string]interface{}{"name": "p", "namespace": "default"},
	}}
	plan := &engine.Plan{Items: []engine.Item{{Action: v1alpha1.SyncActionCreate, GVR: configMaps, Desired: configMap("p-a", map[string]interface{}{"a": "1"})}}}
	out, warnings := (&Runner{}).wouldStore(definitiontest.Compile(t, cc), parent, plan, nil)
	if len(out) != 1 || len(warnings) != 0 {
		t.Fatalf("got %d children, warnings %q; want 1, none", len(out), warnings)
	}
	if refs := out[0].GetOwnerReferences(); len(refs) != 0 {
		t.Errorf("ownerReferences %v: a parent that does not exist has no uid to refer to", refs)
	}
}

func TestWouldStoreFallsBackToTheHooksChild(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello", "metadata": map[string]interface{}{"name": "p", "namespace": "default"},
	}}
	desired := configMap("p-a", map[string]interface{}{"a": "1"})
	// Observed as another kind: nothing to merge into.
	observed := configMap("p-a", nil)
	observed.SetKind("Secret")
	plan := &engine.Plan{Items: []engine.Item{{Action: v1alpha1.SyncActionUpdate, GVR: configMaps, Desired: desired, Observed: observed}}}
	out, warnings := (&Runner{}).wouldStore(definitiontest.Compile(t, cc), parent, plan, nil)
	if len(out) != 1 || out[0] != desired {
		t.Errorf("got %v, want the hook's child", out)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "ConfigMap default/p-a") {
		t.Errorf("warnings %q, want one naming the child", warnings)
	}
}

func BenchmarkWouldStore(b *testing.B) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
	}}
	plan := &engine.Plan{}
	for i := 0; i < 10; i++ {
		plan.Items = append(plan.Items, engine.Item{Action: v1alpha1.SyncActionCreate, GVR: configMaps,
			Desired: configMap("p-"+string(rune('a'+i)), map[string]interface{}{"color": "blue", "item": "x"})})
	}
	r := &Runner{}
	def := definitiontest.Compile(b, cc)
	b.ReportAllocs()
	for b.Loop() {
		if out, warnings := r.wouldStore(def, parent, plan, nil); len(out) != 10 || len(warnings) != 0 {
			b.Fatalf("%d children, warnings %q", len(out), warnings)
		}
	}
}

func BenchmarkWouldStoreSchema(b *testing.B) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
	}}
	plan := &engine.Plan{}
	for i := 0; i < 10; i++ {
		plan.Items = append(plan.Items, engine.Item{Action: v1alpha1.SyncActionCreate, GVR: configMaps,
			Desired: configMap("p-"+string(rune('a'+i)), map[string]interface{}{"color": "blue", "item": "x"})})
	}
	r := &Runner{cluster: &target.Cluster{Schemas: fieldowner.NewSchemas(openapitest.NewEmbeddedFileClient())}}
	def := definitiontest.Compile(b, cc)
	b.ReportAllocs()
	for b.Loop() {
		if out, warnings := r.wouldStore(def, parent, plan, nil); len(out) != 10 || len(warnings) != 0 {
			b.Fatalf("%d children, warnings %q", len(out), warnings)
		}
	}
}
