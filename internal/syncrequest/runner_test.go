package syncrequest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/openapi/openapitest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
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

// TestASyncComparesChildrenWithTheLoopsMemo: a /sync preview asks the target
// cluster nothing, so what its admission and defaulting do to a child it
// knows only from the loop, which asked: a child that admission alone makes
// differ from the hook's (a policy overrides a label the hook sets) is
// planned unchanged, as the loop plans it, where the loop runs on this
// replica; without it the local merge decides.
func TestASyncComparesChildrenWithTheLoopsMemo(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
		"spec":     map[string]interface{}{"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "p"}}},
	}}
	cc := definitiontest.ConfigMapController("demo", "0e7c1f1e-0000-4000-8000-0000000000cc", "http://hook.invalid/sync")
	cc.Spec.ChildResources[0].UpdateStrategy = &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace}
	def := definitiontest.Compile(t, cc)
	desired := configMap("p-a", map[string]interface{}{"color": "blue"})
	desired.SetLabels(map[string]string{"app": "p", "team": "hook"})
	live := stored(t, desired, def.FieldManager, []metav1.OwnerReference{engine.ControllerRef(parent)})
	live.SetLabels(map[string]string{"app": "p", "team": "platform"})
	// What the loop learnt: a dry run of the apply answered the child as
	// it is.
	memo := fieldowner.NewUnchanged(deducedSchemas, 10)
	want := engine.WithOwnerReferences(desired, engine.ChildOwnerReferences(parent, desired))
	if res, err := memo.CompareDryRun(live, want, live.DeepCopy(), def.FieldManager); err != nil || res.Changed {
		t.Fatalf("the loop's dry run: %+v, %v; want it unchanged", res, err)
	}
	rec := &reconcile.Controller{Def: def, Hooks: engine.Hooks{Sync: engine.InProcess(hookapi.SyncHookFunc(
		func(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
			return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{desired.DeepCopy()}}, nil
		}))}}
	req := &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: "default", Name: "p"}}}
	for _, tc := range []struct {
		name   string
		caches ChildCaches
		want   v1alpha1.SyncAction
	}{
		{"the loop runs here: its memo decides", memoCaches{memo}, v1alpha1.SyncActionUnchanged},
		{"no loop here: the local merge decides", nil, v1alpha1.SyncActionUpdate},
		{"a loop without a memo: the local merge decides", memoCaches{}, v1alpha1.SyncActionUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"}, live.DeepCopy())
			r := &Runner{cluster: &target.Cluster{Dynamic: client, Schemas: deducedSchemas}, caches: tc.caches}
			res, err := r.sync(context.Background(), rec, definition.GuessingResolver(), &rights.Actor{}, parent, req, true)
			if err != nil {
				t.Fatal(err)
			}
			items := res.res.Plan.Items
			if len(items) != 1 || items[0].Action != tc.want {
				t.Fatalf("plan %+v, want the child %s", items, tc.want)
			}
			if tc.want == v1alpha1.SyncActionUnchanged && (items[0].Reason != "" || len(items[0].Diff) > 0) {
				t.Errorf("reason %q, diff %q; want neither: the child is converged", items[0].Reason, items[0].Diff)
			}
		})
	}
}

// TestALiveSyncRespectsAPausedParent: the controller loop does not sync a
// parent annotated paused, and a live /sync does not either: it is refused
// with a Conflict that names the annotation and how to sync the parent. A
// preview of it runs and warns that the loop does not sync it.
func TestALiveSyncRespectsAPausedParent(t *testing.T) {
	def := definitiontest.Compile(t, definitiontest.ConfigMapController("demo", "0e7c1f1e-0000-4000-8000-0000000000cc", "http://hook.invalid/sync"))
	for _, tc := range []struct {
		name        string
		annotation  string
		dryRun      bool
		wantRefused bool
		wantWarning bool
	}{
		{name: "a live sync of a paused parent is refused", annotation: "true", wantRefused: true},
		{name: "a preview of a paused parent warns", annotation: "true", dryRun: true, wantWarning: true},
		{name: "a live sync of a parent not paused runs"},
		{name: "only true pauses", annotation: "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "example.com/v1", "kind": "Hello",
				"metadata": map[string]interface{}{"name": "p", "namespace": "team-a"},
			}}
			if tc.annotation != "" {
				parent.SetAnnotations(map[string]string{v1alpha1.ParentPausedAnnotation: tc.annotation})
			}
			warning, err := pausedParent(def, parent, tc.dryRun)
			if refused := apierrors.IsConflict(err); refused != tc.wantRefused || (err != nil && !refused) {
				t.Fatalf("error %v, want a Conflict %v", err, tc.wantRefused)
			}
			if tc.wantRefused {
				for _, says := range []string{v1alpha1.ParentPausedAnnotation, "?dryRun=All", "kubectl annotate -n team-a hellos.example.com p " + v1alpha1.ParentPausedAnnotation + "-"} {
					if !strings.Contains(err.Error(), says) {
						t.Errorf("refusal %q does not say %q", err, says)
					}
				}
			}
			if (warning != "") != tc.wantWarning || tc.wantWarning && !strings.Contains(warning, "the controller loop does not sync it") {
				t.Errorf("warning %q, want one %v saying the loop does not sync it", warning, tc.wantWarning)
			}
		})
	}
}

// TestAPreviewOfAPausedParentSaysTheLoopDoesNotSyncIt: the warning reaches
// the answer of a preview, which otherwise plans as for any parent.
func TestAPreviewOfAPausedParentSaysTheLoopDoesNotSyncIt(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p-a"},"data":{"k":"v"}}]}`))
	}))
	defer hook.Close()
	cc := definitiontest.ConfigMapController("demo", "0e7c1f1e-0000-4000-8000-0000000000cc", hook.URL+"/sync")
	req := &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{
		Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","namespace":"default","annotations":{"` + v1alpha1.ParentPausedAnnotation + `":"true"}}}`),
	}}}
	st, err := NewRunner(context.Background(), nil, nil, hooks.Destinations{}).Run(context.Background(), cc, req, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Plan) != 1 || st.Plan[0].Action != v1alpha1.SyncActionCreate {
		t.Errorf("plan %+v, want the child created", st.Plan)
	}
	var warned bool
	for _, w := range st.Warnings {
		warned = warned || strings.Contains(w, "Hello default/p is annotated "+v1alpha1.ParentPausedAnnotation+"=true")
	}
	if !warned {
		t.Errorf("warnings %q, want one saying the parent is paused", st.Warnings)
	}
}

// memoCaches are a loop's caches with its comparison (nil for none) and
// no index.
type memoCaches struct{ ownership engine.FieldOwnership }

func (memoCaches) Children(schema.GroupVersionResource) (engine.ChildIndex, bool) { return nil, false }
func (c memoCaches) Ownership() engine.FieldOwnership                             { return c.ownership }
