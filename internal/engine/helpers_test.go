package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

const (
	parentUID = "uid-parent"
	parentNS  = "ns"
)

var thingsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}

// newParent is a namespaced parent selecting app=p.
func newParent() *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Thing",
		"metadata": map[string]interface{}{
			"name":      "p",
			"namespace": parentNS,
			"uid":       parentUID,
		},
		"spec": map[string]interface{}{
			"selector": map[string]interface{}{
				"matchLabels": map[string]interface{}{"app": "p"},
			},
		},
	}}
	return p
}

func deleting(obj *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	obj.SetDeletionTimestamp(&now)
	return obj
}

func childRule(apiVersion, resource string, method v1alpha1.ChildUpdateMethod) v1alpha1.CompositeControllerChildResourceRule {
	r := v1alpha1.CompositeControllerChildResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: apiVersion, Resource: resource}}
	if method != "" {
		r.UpdateStrategy = &v1alpha1.CompositeControllerChildUpdateStrategy{Method: method}
	}
	return r
}

// newController declares configmaps (InPlace), deployments (default
// OnDelete), secrets (Recreate), services (RollingRecreate) and namespaces.
func newController(mods ...func(*v1alpha1.CompositeController)) *v1alpha1.CompositeController {
	v1 := v1alpha1.HookVersionV1
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "things"},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{
				ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"},
			},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{
				childRule("v1", "configmaps", v1alpha1.ChildUpdateInPlace),
				childRule("apps/v1", "deployments", ""),
				childRule("v1", "secrets", v1alpha1.ChildUpdateRecreate),
				childRule("v1", "services", v1alpha1.ChildUpdateRollingRecreate),
				childRule("v1", "namespaces", ""),
			},
			Hooks: &v1alpha1.CompositeControllerHooks{
				Sync: &v1alpha1.Hook{Version: &v1},
			},
		},
	}
	for _, m := range mods {
		m(cc)
	}
	return cc
}

func withSyncVersion(v v1alpha1.HookVersion) func(*v1alpha1.CompositeController) {
	return func(cc *v1alpha1.CompositeController) { cc.Spec.Hooks.Sync.Version = &v }
}

func withGenerateSelector(cc *v1alpha1.CompositeController) {
	cc.Spec.GenerateSelector = ptr.To(true)
}

func withCustomize(cc *v1alpha1.CompositeController) {
	cc.Spec.Hooks.Customize = &v1alpha1.Hook{}
}

func withFinalize(cc *v1alpha1.CompositeController) {
	cc.Spec.Hooks.Finalize = &v1alpha1.Hook{}
}

// object builds a child labelled app=p; fields are set at dotted paths.
func object(apiVersion, kind, namespace, name string, fields ...interface{}) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]interface{}{}}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetLabels(map[string]string{"app": "p"})
	for i := 0; i+1 < len(fields); i += 2 {
		setField(obj.Object, fields[i+1], splitPath(fields[i].(string))...)
	}
	return obj
}

// setField is unstructured.SetNestedField without the deep copy, which
// panics on Go types such as int that in-process hooks may well use.
func setField(m map[string]interface{}, value interface{}, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// cm is a ConfigMap in the parent's namespace with data.color.
func cm(name, color string) *unstructured.Unstructured {
	return object("v1", "ConfigMap", parentNS, name, "data.color", color)
}

// owned makes the parent obj's controller.
func owned(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj.SetOwnerReferences([]metav1.OwnerReference{ControllerRef(newParent())})
	appliedBy(obj, definition.FieldManager("things"))
	obj.SetUID(k8stypes.UID("uid-" + obj.GetName()))
	return obj
}

// appliedBy records in obj's managedFields that manager applied all of it,
// as the API server would after a server-side apply of exactly obj.
func appliedBy(obj *unstructured.Unstructured, manager string) {
	tv, err := managedfields.NewDeducedTypeConverter().ObjectToTyped(obj)
	if err != nil {
		panic(err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		panic(err)
	}
	system := fieldpath.NewSet()
	for _, p := range [][]string{{"apiVersion"}, {"kind"}, {"metadata"}, {"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "uid"}} {
		system.Insert(fieldpath.MakePathOrDie(toInterfaces(p)...))
	}
	set = set.Difference(system)
	fields, err := set.ToJSON()
	if err != nil {
		panic(err)
	}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: obj.GetAPIVersion(),
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields},
	}})
}

func toInterfaces(p []string) []interface{} {
	out := make([]interface{}, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}

// returning is a sync hook that returns children, the same objects on every
// call: Compute must not modify them.
func returning(children ...*unstructured.Unstructured) hookapi.SyncHook {
	return hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"ok": true}, Children: children}, nil
	})
}

// mustNotCall fails the test when the hook is called.
func mustNotCall(t *testing.T, name string) hookapi.SyncHook {
	return hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		t.Errorf("the %s hook was called", name)
		return nil, fmt.Errorf("%s hook must not be called", name)
	})
}

func newInput(cc *v1alpha1.CompositeController, parent *unstructured.Unstructured, children Claimed, hook hookapi.SyncHook) Input {
	return Input{
		Definition: compile(cc),
		Parent:     parent,
		Children:   children,
		Hooks:      Hooks{Sync: InProcess(hook)},
		Resolver:   definition.GuessingResolver(),
	}
}

// summary renders items as "Action Kind namespace/name".
func summary(p *Plan) []string {
	var out []string
	for _, it := range p.Items {
		obj := it.Desired
		if obj == nil {
			obj = it.Observed
		}
		out = append(out, fmt.Sprintf("%s %s %s", it.Action, obj.GetKind(), namespacedName(obj.GetNamespace(), obj.GetName())))
	}
	return out
}

func hasDelete(p *Plan) bool {
	if p == nil {
		return false
	}
	for _, it := range p.Items {
		if it.Action == v1alpha1.SyncActionDelete || it.Action == v1alpha1.SyncActionRecreate {
			return true
		}
	}
	return false
}

// compile compiles cc as the loop and /sync do, with the resolver of a
// preview without a cluster; it panics on a controller that can't compile,
// which no test means to give.
func compile(cc *v1alpha1.CompositeController) *definition.Definition {
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		panic(err)
	}
	return def
}

// recompiled is def compiled again after modify changed its controller.
func recompiled(def *definition.Definition, modify func(*v1alpha1.CompositeController)) *definition.Definition {
	cc := def.Object.DeepCopy()
	modify(cc)
	return compile(cc)
}
