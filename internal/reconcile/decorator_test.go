package reconcile

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

type listed []*unstructured.Unstructured

func (l listed) List(_ context.Context, gvr schema.GroupVersionResource, ns string, _ labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range l {
		// "" lists every namespace, as for a cluster-scoped parent.
		if ns == "" || o.GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out, nil
}
func (listed) Namespaces(context.Context, labels.Selector) ([]string, error) { return nil, nil }

func configMap(name string, owner *unstructured.Unstructured, annotations map[string]string) *unstructured.Unstructured {
	cm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	cm.SetName(name)
	cm.SetNamespace("ns")
	cm.SetUID(types.UID("uid-" + name))
	cm.SetAnnotations(annotations)
	if owner != nil {
		cm.SetOwnerReferences([]metav1.OwnerReference{engine.ControllerRef(owner)})
	}
	return cm
}

// A DecoratorController's sync: the hook sees only the object's attachments
// (objects it controls that carry the decorator's annotation), its labels
// and annotations are set and removed with one patch, its status written,
// a new attachment applied with the annotation, one no longer returned
// deleted, and the object's other dependents left alone.
func TestSyncDecoratesTheObject(t *testing.T) {
	dc := &v1alpha1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "deco"}, Spec: v1alpha1.DecoratorControllerSpec{
		Resources:   []v1alpha1.DecoratorControllerResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
		Attachments: []v1alpha1.DecoratorControllerAttachmentRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
		Hooks:       &v1alpha1.DecoratorControllerHooks{Sync: &v1alpha1.Hook{Version: ptr.To(v1alpha1.HookVersionV2)}},
	}}
	def, err := definition.Compile(dc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	obj := parent()
	obj.SetLabels(map[string]string{"team": "a", "stale": "yes"})
	ours := configMap("ours", obj, map[string]string{definition.DecoratorAnnotation: "deco"})
	others := configMap("others", obj, map[string]string{definition.DecoratorAnnotation: "another-decorator"})
	plain := configMap("plain", obj, nil)

	var got *hookapi.DecoratorHookRequest
	hook := engine.InProcessDecorator(hookapi.DecoratorHookFunc(func(_ context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, error) {
		got = req
		return &hookapi.DecoratorHookResponse{
			Labels:      map[string]*string{"decorated": ptr.To("yes"), "stale": nil},
			Annotations: map[string]*string{"note": ptr.To("hello")},
			Status:      map[string]interface{}{"attachments": int64(1)},
			Attachments: []*unstructured.Unstructured{{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "p-new"}}}},
		}, nil
	}))
	rec := &Controller{Def: def.Parents()[0], Hooks: engine.Hooks{Decorator: engine.DecoratorHooks{Sync: hook}}}
	e, client := env(t, obj, ours, others, plain)
	e.Children = listed{ours, others, plain}
	// Applies go through the metadata client; record them.
	var applied []*unstructured.Unstructured
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	meta := metadatafake.NewSimpleMetadataClient(scheme)
	meta.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &u.Object); err != nil {
			return true, nil, err
		}
		applied = append(applied, u)
		return true, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), UID: "uid-new", ResourceVersion: "1"}}, nil
	})
	e.Metadata = meta
	var patches []string
	client.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		patches = append(patches, a.GetResource().Resource+" "+p.GetName()+" "+string(p.GetPatch()))
		return false, nil, nil
	})
	res, err := rec.Sync(context.Background(), e, obj, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Object.GetName() != "p" || got.Controller.Name != "deco" {
		t.Fatalf("hook request %+v", got)
	}
	if attachments := got.Attachments["ConfigMap.v1"]; len(attachments) != 1 || attachments["ns/ours"] == nil {
		t.Errorf("the hook saw attachments %v, want only ns/ours", attachments)
	}
	done := map[string]string{}
	for _, d := range res.Done {
		done[d.Name] = string(d.Action)
	}
	if done["p-new"] != "Create" || done["ours"] != "Delete" || done["others"] != "" || done["plain"] != "" {
		t.Errorf("done %v: want p-new created, ours deleted, the rest untouched", done)
	}
	var decoration map[string]interface{}
	for _, p := range patches {
		if len(p) > len("things p ") && p[:len("things p ")] == "things p " {
			_ = json.Unmarshal([]byte(p[len("things p "):]), &decoration)
		}
	}
	md, _ := decoration["metadata"].(map[string]interface{})
	if md == nil || md["labels"] == nil || md["annotations"] == nil {
		t.Fatalf("patches %v: want one on the object setting labels and annotations", patches)
	}
	if l := md["labels"].(map[string]interface{}); l["decorated"] != "yes" || l["stale"] != nil || len(l) != 2 {
		t.Errorf("labels patch %v: want decorated set and stale removed", l)
	}
	stored, err := client.Resource(things).Namespace("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := stored.Object["status"].(map[string]interface{})["observedGeneration"]; has || !res.StatusWritten {
		t.Errorf("status %v: want the hook's as it is, no observedGeneration", stored.Object["status"])
	}
	if len(applied) != 1 || applied[0].GetName() != "p-new" || applied[0].GetAnnotations()[definition.DecoratorAnnotation] != "deco" {
		t.Errorf("applied %v: want p-new with %s: deco", applied, definition.DecoratorAnnotation)
	} else if ref := metav1.GetControllerOfNoCopy(applied[0]); ref == nil || ref.UID != obj.GetUID() {
		t.Errorf("the attachment's controller is %v, want the decorated object", ref)
	}
}

// As Metacontroller (whose decorator getChildren keeps only the objects the
// decorated object controls), a DecoratorController never adopts: an
// orphan carrying its annotation (its object deleted with
// --cascade=orphan) is not shown to the hook, not adopted and not deleted,
// whether or not the hook asks for its name. Asked for, it is left as it
// is, as Metacontroller's create of it fails with AlreadyExists and is
// skipped, and a warning says so.
func TestDecoratorNeverAdoptsOrphans(t *testing.T) {
	dc := &v1alpha1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "deco"}, Spec: v1alpha1.DecoratorControllerSpec{
		Resources:   []v1alpha1.DecoratorControllerResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}}},
		Attachments: []v1alpha1.DecoratorControllerAttachmentRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
		Hooks:       &v1alpha1.DecoratorControllerHooks{Sync: &v1alpha1.Hook{}},
	}}
	def, err := definition.Compile(dc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		askedByName   bool
		wantWarning   bool
		clusterScoped bool
	}{
		{name: "an orphan the hook does not ask for is not deleted"},
		{name: "an orphan the hook asks for by name is not adopted", askedByName: true, wantWarning: true},
		{name: "a cluster-scoped object's sync, which lists every namespace, does not delete an orphan", clusterScoped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := parent()
			if tc.clusterScoped {
				obj.SetNamespace("")
			}
			orphan := configMap("other-att", nil, map[string]string{definition.DecoratorAnnotation: "deco"})
			stranger := configMap("stranger", nil, nil)
			var seen []string
			hook := engine.InProcessDecorator(hookapi.DecoratorHookFunc(func(_ context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, error) {
				for key := range req.Attachments["ConfigMap.v1"] {
					seen = append(seen, key)
				}
				resp := &hookapi.DecoratorHookResponse{}
				if tc.askedByName {
					resp.Attachments = []*unstructured.Unstructured{orphan.DeepCopy()}
				}
				return resp, nil
			}))
			e, client := env(t, obj, orphan, stranger)
			e.Children = listed{orphan, stranger}
			res, err := (&Controller{Def: def.Parents()[0], Hooks: engine.Hooks{Decorator: engine.DecoratorHooks{Sync: hook}}}).Sync(context.Background(), e, obj, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 0 {
				t.Errorf("the hook saw attachments %v, want none: the object controls none", seen)
			}
			for _, d := range res.Done {
				t.Errorf("done %s %s: want nothing done to an orphan", d.Action, d.Name)
			}
			if got := len(res.Warnings) > 0; got != tc.wantWarning {
				t.Errorf("warnings %q, want some: %v", res.Warnings, tc.wantWarning)
			}
			kept, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(context.Background(), "other-att", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the orphan: %v", err)
			}
			if ref := metav1.GetControllerOfNoCopy(kept); ref != nil || kept.GetUID() != orphan.GetUID() {
				t.Errorf("the orphan's controller %v, uid %s: want it untouched", ref, kept.GetUID())
			}
		})
	}
}
