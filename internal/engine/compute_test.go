package engine

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func TestComputePlan(t *testing.T) {
	foreignRef := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Other", Name: "o", UID: "uid-other", Controller: ptr.To(true)}

	for _, tc := range []struct {
		name       string
		controller *v1alpha1.CompositeController
		children   Claimed
		desired    []*unstructured.Unstructured
		// existing are objects an index finds by name (Input.Existing).
		existing []*unstructured.Unstructured
		want     []string
		check    func(t *testing.T, p *Plan)
	}{
		{
			name:    "a child that does not exist is created",
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Create ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Items[0].GVR != (schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}) || p.Items[0].Observed != nil {
					t.Errorf("item %+v", p.Items[0])
				}
			},
		},
		{
			name:     "a child that matches is unchanged",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}},
			desired:  []*unstructured.Unstructured{cm("a", "blue")},
			want:     []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if it := p.Items[0]; it.Desired == nil || it.Observed == nil || len(it.Diff) != 0 || it.Reason != "" {
					t.Errorf("item %+v", it)
				}
			},
		},
		{
			name: "fields the cluster added are no difference",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(object("apps/v1", "Deployment", parentNS, "web",
				"spec.replicas", int64(2), "spec.strategy.type", "RollingUpdate", "status.replicas", int64(2)))}},
			desired: []*unstructured.Unstructured{object("apps/v1", "Deployment", parentNS, "web", "spec.replicas", 2)},
			want:    []string{"Unchanged Deployment ns/web"},
		},
		{
			name:     "a changed child with updateStrategy InPlace is updated, with a diff naming the field",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}},
			desired:  []*unstructured.Unstructured{cm("a", "green")},
			want:     []string{"Update ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				it := p.Items[0]
				if !reflect.DeepEqual(it.Diff, []string{`data.color: "blue" -> "green"`}) {
					t.Errorf("diff %q", it.Diff)
				}
				if it.Reason != "differs; updateStrategy InPlace updates it in place" || it.Observed == nil || it.Desired == nil {
					t.Errorf("item %+v", it)
				}
			},
		},
		{
			name:     "a data key the hook stopped returning is removed: an update with a - line",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(object("v1", "ConfigMap", parentNS, "a", "metadata.labels.app", "p", "data.color", "blue", "data.size", "L"))}},
			desired:  []*unstructured.Unstructured{cm("a", "blue")},
			want:     []string{"Update ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if !reflect.DeepEqual(p.Items[0].Diff, []string{`- data.size: "L"`}) {
					t.Errorf("diff %q", p.Items[0].Diff)
				}
			},
		},
		{
			name:     "an object of the desired name without a controller that does not match the selector is not taken over",
			children: Claimed{Unowned: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "a", "data.color", "mine")}},
			desired:  []*unstructured.Unstructured{cm("a", "blue")},
			want:     []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Items[0].Reason != reasonUnowned || !containsProblem(p.Warnings, "exists without a controller and does not match the parent's selector") {
					t.Errorf("item %+v, warnings %q", p.Items[0], p.Warnings)
				}
			},
		},
		{
			name: "a child last written by Metacontroller is taken over, and what the hook dropped is pruned",
			children: Claimed{Owned: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := owned(object("v1", "ConfigMap", parentNS, "a", "metadata.labels.app", "p", "data.color", "blue", "data.size", "L"))
				appliedBy(o, "metacontroller")
				return o
			}()}},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Update ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				it := p.Items[0]
				if len(it.Takeover) == 0 || !containsProblem(it.Diff, `- data.size: "L"`) {
					t.Errorf("takeover %s, diff %q", it.Takeover, it.Diff)
				}
			},
		},
		{
			name:     "a changed child with updateStrategy OnDelete is left alone, with the reason and diff",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(object("apps/v1", "Deployment", parentNS, "web", "spec.replicas", int64(1)))}},
			desired:  []*unstructured.Unstructured{object("apps/v1", "Deployment", parentNS, "web", "spec.replicas", int64(3))},
			want:     []string{"Unchanged Deployment ns/web"},
			check: func(t *testing.T, p *Plan) {
				it := p.Items[0]
				if it.Reason != reasonOnDelete {
					t.Errorf("reason %q", it.Reason)
				}
				if !reflect.DeepEqual(it.Diff, []string{"spec.replicas: 1 -> 3"}) {
					t.Errorf("diff %q", it.Diff)
				}
			},
		},
		{
			name:     "a changed child with updateStrategy Recreate is recreated",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(object("v1", "Secret", parentNS, "s", "stringData.k", "old"))}},
			desired:  []*unstructured.Unstructured{object("v1", "Secret", parentNS, "s", "stringData.k", "new")},
			want:     []string{"Recreate Secret ns/s"},
		},
		{
			name:     "RollingRecreate: a child no revision claims yet goes to the latest revision at once",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(object("v1", "Service", parentNS, "svc", "spec.type", "ClusterIP"))}},
			desired:  []*unstructured.Unstructured{object("v1", "Service", parentNS, "svc", "spec.type", "NodePort")},
			want:     []string{"Recreate Service ns/svc"},
			check: func(t *testing.T, p *Plan) {
				r := p.Rollout
				if r == nil || r.Reason != ReasonOnLatestRevision || len(r.Create) != 1 || p.Items[0].Revision != r.Latest {
					t.Fatalf("rollout %+v, item revision %q", r, p.Items[0].Revision)
				}
				if len(p.Warnings) != 0 {
					t.Errorf("warnings %q", p.Warnings)
				}
			},
		},
		{
			name:     "a child the hook no longer returns is deleted",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue")), owned(cm("b", "blue"))}},
			desired:  []*unstructured.Unstructured{cm("a", "blue")},
			want:     []string{"Unchanged ConfigMap ns/a", "Delete ConfigMap ns/b"},
			check: func(t *testing.T, p *Plan) {
				if it := p.Items[1]; it.Observed == nil || it.Desired != nil || it.Observed.GetUID() != "uid-b" {
					t.Errorf("delete item %+v", it)
				}
			},
		},
		{
			name:     "no children returned deletes all",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}},
			want:     []string{"Delete ConfigMap ns/a"},
		},
		{
			name:     "a matching orphan is adopted and updated",
			children: Claimed{Adopt: []*unstructured.Unstructured{cm("z", "blue")}},
			desired:  []*unstructured.Unstructured{cm("z", "red")},
			want:     []string{"Adopt ConfigMap ns/z", "Update ConfigMap ns/z"},
		},
		{
			name:     "an adopted orphan the hook does not return is adopted and deleted",
			children: Claimed{Adopt: []*unstructured.Unstructured{cm("z", "blue")}},
			want:     []string{"Adopt ConfigMap ns/z", "Delete ConfigMap ns/z"},
		},
		{
			name: "a released child is orphaned, not deleted",
			children: Claimed{
				Owned:   []*unstructured.Unstructured{owned(cm("a", "blue"))},
				Release: []*unstructured.Unstructured{owned(object("v1", "ConfigMap", parentNS, "gone", "metadata.labels.app", "q"))},
			},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Orphan ConfigMap ns/gone", "Unchanged ConfigMap ns/a"},
		},
		{
			name: "a released child the hook returns again is taken back",
			children: Claimed{
				Release: []*unstructured.Unstructured{owned(object("v1", "ConfigMap", parentNS, "a", "metadata.labels.app", "q"))},
			},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Orphan ConfigMap ns/a", "Create ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if !strings.Contains(p.Items[1].Reason, "released") {
					t.Errorf("reason %q", p.Items[1].Reason)
				}
			},
		},
		{
			name: "a desired child that another owner controls is left alone",
			children: Claimed{Foreign: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := cm("a", "x")
				o.SetOwnerReferences([]metav1.OwnerReference{foreignRef})
				return o
			}()}},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Items[0].Reason != ReasonForeign {
					t.Errorf("reason %q", p.Items[0].Reason)
				}
			},
		},
		{
			name: "with an index, a desired child whose name an object controlled elsewhere holds is found by name and left alone",
			existing: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := cm("a", "x")
				o.SetOwnerReferences([]metav1.OwnerReference{foreignRef})
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Items[0].Reason != ReasonForeign {
					t.Errorf("reason %q", p.Items[0].Reason)
				}
			},
		},
		{
			name: "a desired child whose name another parent's child holds is left alone",
			children: Claimed{Others: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := cm("a", "x")
				o.SetOwnerReferences([]metav1.OwnerReference{foreignRef})
				o.SetLabels(nil)
				return o
			}()}},
			desired: []*unstructured.Unstructured{cm("a", "blue")},
			want:    []string{"Unchanged ConfigMap ns/a"},
		},
		{
			name:     "a desired child that is being deleted waits for the deletion",
			children: Claimed{Owned: []*unstructured.Unstructured{deleting(owned(cm("a", "blue")))}},
			desired:  []*unstructured.Unstructured{cm("a", "green")},
			want:     []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Items[0].Reason != "waiting for the old child to be deleted" {
					t.Errorf("reason %q", p.Items[0].Reason)
				}
			},
		},
		{
			name:     "an undesired child that is already being deleted is not deleted again",
			children: Claimed{Owned: []*unstructured.Unstructured{deleting(owned(cm("a", "blue")))}},
			want:     []string{"Unchanged ConfigMap ns/a"},
		},
		{
			name:    "a child without namespace gets the parent's",
			desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")},
			want:    []string{"Create ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if p.Desired[0].GetNamespace() != parentNS {
					t.Errorf("desired namespace %q", p.Desired[0].GetNamespace())
				}
				if p.Response.Children[0].GetNamespace() != "" {
					t.Errorf("the hook's own answer was modified")
				}
			},
		},
		{
			name:       "generateSelector labels children with controller-uid",
			controller: newController(withGenerateSelector),
			desired:    []*unstructured.Unstructured{cm("a", "blue")},
			want:       []string{"Create ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				want := map[string]string{"app": "p", "controller-uid": parentUID}
				if got := p.Desired[0].GetLabels(); !reflect.DeepEqual(got, want) {
					t.Errorf("labels %v, want %v", got, want)
				}
			},
		},
		{
			name:       "generateSelector labels a child with labels or without, and leaves the hook's answer as it was",
			controller: newController(withGenerateSelector),
			desired: []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a"), func() *unstructured.Unstructured {
				o := object("v1", "ConfigMap", "", "b")
				delete(o.Object["metadata"].(map[string]interface{}), "labels")
				return o
			}()},
			want: []string{"Create ConfigMap ns/a", "Create ConfigMap ns/b"},
			check: func(t *testing.T, p *Plan) {
				for i, want := range []map[string]string{{"app": "p", "controller-uid": parentUID}, {"controller-uid": parentUID}} {
					if got := p.Desired[i].GetLabels(); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: labels %v, want %v", p.Desired[i].GetName(), got, want)
					}
				}
				if a, b := p.Response.Children[0].GetLabels(), p.Response.Children[1].GetLabels(); !reflect.DeepEqual(a, map[string]string{"app": "p"}) || b != nil {
					t.Errorf("the hook's own answer was modified: its children's labels are %v and %v", a, b)
				}
			},
		},
		{
			name: "system metadata from the hook is dropped; its owner references are kept but another controller's, and the parent's is appended",
			desired: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				o := cm("a", "blue")
				o.SetResourceVersion("7")
				o.SetUID("uid-x")
				o.SetGeneration(3)
				o.SetOwnerReferences([]metav1.OwnerReference{
					{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "uid-pod"},
					{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)},
				})
				return o
			}()},
			want: []string{"Create ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				md := p.Desired[0].Object["metadata"].(map[string]interface{})
				for _, f := range []string{"resourceVersion", "uid", "generation"} {
					if _, ok := md[f]; ok {
						t.Errorf("metadata.%s kept", f)
					}
				}
				refs := ChildOwnerReferences(newParent(), p.Desired[0])
				if len(refs) != 2 || refs[0].UID != "uid-pod" || refs[1].UID != parentUID || refs[1].Controller == nil || !*refs[1].Controller {
					t.Errorf("ownerReferences applied %+v, want the Pod's, then the parent's controller reference", refs)
				}
				if !containsProblem(p.Warnings, "the controller reference to ReplicaSet rs set by the hook is dropped") {
					t.Errorf("warnings %q", p.Warnings)
				}
			},
		},
		{
			name:     "returning observed children as they are is no change and no warning",
			children: Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}},
			desired:  []*unstructured.Unstructured{owned(cm("a", "blue"))},
			want:     []string{"Unchanged ConfigMap ns/a"},
			check: func(t *testing.T, p *Plan) {
				if len(p.Warnings) != 0 {
					t.Errorf("warnings %q", p.Warnings)
				}
			},
		},
		{
			name: "items are ordered: claims first, then by apiVersion, kind, namespace and name",
			children: Claimed{
				Owned:   []*unstructured.Unstructured{owned(cm("b", "blue")), owned(object("apps/v1", "Deployment", parentNS, "web"))},
				Adopt:   []*unstructured.Unstructured{cm("z", "blue")},
				Release: []*unstructured.Unstructured{owned(object("v1", "ConfigMap", parentNS, "gone", "metadata.labels.app", "q"))},
			},
			desired: []*unstructured.Unstructured{object("v1", "Secret", parentNS, "s"), cm("c", "x"), cm("a", "x"), cm("z", "blue")},
			want: []string{
				"Orphan ConfigMap ns/gone", "Adopt ConfigMap ns/z",
				"Delete Deployment ns/web",
				"Create ConfigMap ns/a", "Delete ConfigMap ns/b", "Create ConfigMap ns/c", "Update ConfigMap ns/z",
				"Create Secret ns/s",
			},
			check: func(t *testing.T, p *Plan) {
				var got []string
				for _, d := range p.Desired {
					got = append(got, d.GetKind()+"/"+d.GetName())
				}
				if want := []string{"ConfigMap/a", "ConfigMap/c", "ConfigMap/z", "Secret/s"}; !reflect.DeepEqual(got, want) {
					t.Errorf("desired %v, want %v", got, want)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := tc.controller
			if cc == nil {
				cc = newController()
			}
			for i := 0; i < 3; i++ {
				in := newInput(cc, newParent(), tc.children, returning(tc.desired...))
				if tc.existing != nil {
					in.Existing = byName(tc.existing)
				}
				plan, err := Compute(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if got := summary(plan); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("items\n%q\nwant\n%q", got, tc.want)
				}
				if plan.Finalizing || plan.Response == nil || plan.HookRequest == nil {
					t.Errorf("finalizing %v, response %v, request %v", plan.Finalizing, plan.Response, plan.HookRequest)
				}
				if tc.check != nil && i == 0 {
					tc.check(t, plan)
				}
			}
		})
	}
}

func TestComputeHookRequest(t *testing.T) {
	capture := func(req **hookapi.SyncHookRequest) hookapi.SyncHook {
		return hookapi.SyncHookFunc(func(ctx context.Context, r *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
			*req = r
			return &hookapi.SyncHookResponse{}, nil
		})
	}
	children := Claimed{
		Owned:   []*unstructured.Unstructured{owned(cm("a", "blue"))},
		Adopt:   []*unstructured.Unstructured{cm("z", "blue")},
		Release: []*unstructured.Unstructured{owned(object("apps/v1", "Deployment", parentNS, "gone", "metadata.labels.app", "q"))},
	}
	for _, tc := range []struct {
		name     string
		version  v1alpha1.HookVersion
		wantKeys []string
	}{
		{"v1 keys children by name", v1alpha1.HookVersionV1, []string{"a", "z"}},
		{"v2 keys children by namespace/name", v1alpha1.HookVersionV2, []string{"ns/a", "ns/z"}},
		{"no version means v1", "", []string{"a", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *hookapi.SyncHookRequest
			plan, err := Compute(context.Background(), newInput(newController(withSyncVersion(tc.version)), newParent(), children, capture(&req)))
			if err != nil {
				t.Fatal(err)
			}
			// The hook got a copy of plan.HookRequest, with the same
			// objects.
			if !reflect.DeepEqual(plan.HookRequest, req) || plan.HookRequest == req {
				t.Errorf("plan.HookRequest is not a copy of the request sent")
			}
			if plan.HookRequest.Children["ConfigMap.v1"][tc.wantKeys[0]] != children.Owned[0] {
				t.Errorf("plan.HookRequest holds a copy of the observed child, not the child itself")
			}
			var keys []string
			for k := range req.Children["ConfigMap.v1"] {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !reflect.DeepEqual(keys, tc.wantKeys) {
				t.Errorf("ConfigMap keys %v, want %v", keys, tc.wantKeys)
			}
			// Released children are not sent, but their kind's group is.
			if g, ok := req.Children["Deployment.apps/v1"]; !ok || len(g) != 0 {
				t.Errorf("Deployment group %v (present %v), want present and empty", g, ok)
			}
			if req.Finalizing || req.Parent.GetName() != "p" || req.Controller.Name != "things" || req.Related == nil {
				t.Errorf("request %+v", req)
			}
		})
	}
}

func TestComputeDoesNotModifyItsInput(t *testing.T) {
	children := Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}}
	parent := newParent()
	cc := newController()
	before := []interface{}{children.Owned[0].DeepCopy(), parent.DeepCopy(), cc.DeepCopy()}
	vandal := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		for _, obj := range req.Children.List() {
			unstructured.SetNestedField(obj.Object, "vandalized", "data", "color")
		}
		req.Parent.SetName("vandalized")
		req.Controller.Name = "vandalized"
		return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue")}}, nil
	})
	plan, err := Compute(context.Background(), newInput(cc, parent, children, vandal))
	if err != nil {
		t.Fatal(err)
	}
	after := []interface{}{children.Owned[0], parent, cc}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("input modified")
	}
	if got := summary(plan); !reflect.DeepEqual(got, []string{"Unchanged ConfigMap ns/a"}) {
		t.Errorf("items %q: the hook's changes to its request leaked into the plan", got)
	}
}

func TestComputeCustomize(t *testing.T) {
	// The cluster: ConfigMaps in the parent's namespace and another, and a
	// cluster-scoped StorageClass.
	objects := []*unstructured.Unstructured{
		object("v1", "ConfigMap", parentNS, "settings"),
		object("v1", "ConfigMap", "shared", "settings"),
		object("storage.k8s.io/v1", "StorageClass", "", "fast"),
	}
	source := listerFunc(func(_ context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
		var out []*unstructured.Unstructured
		for _, o := range objects {
			gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
			if gv.Group == gvr.Group && (namespace == "" || o.GetNamespace() == namespace) && selector.Matches(labels.Set(o.GetLabels())) {
				if (gvr.Resource == "configmaps") == (o.GetKind() == "ConfigMap") {
					out = append(out, o)
				}
			}
		}
		return out, nil
	})
	byNames := &hookapi.RelatedResourceRule{APIVersion: "v1", Resource: "configmaps", Names: []string{"settings"}}
	inShared := &hookapi.RelatedResourceRule{APIVersion: "v1", Resource: "configmaps", Namespace: "shared", Names: []string{"settings"}}
	byLabels := &hookapi.RelatedResourceRule{APIVersion: "v1", Resource: "configmaps", LabelSelector: &metav1.LabelSelector{}}
	clusterScoped := &hookapi.RelatedResourceRule{APIVersion: "storage.k8s.io/v1", Resource: "storageclasses", Names: []string{"fast"}}

	for _, tc := range []struct {
		name        string
		version     v1alpha1.HookVersion
		rule        *hookapi.RelatedResourceRule
		source      ObjectLister
		declared    bool
		wantRelated map[string][]string
		wantWarning string
		wantErr     string
	}{
		{
			name: "a v1 hook of a namespaced parent sees related objects of its own namespace, keyed by name", version: v1alpha1.HookVersionV1,
			rule: byNames, source: source, declared: true,
			wantRelated: map[string][]string{"ConfigMap.v1": {"settings"}},
		},
		{
			name: "a v2 hook sees the namespace its rule names, keyed by namespace/name", version: v1alpha1.HookVersionV2,
			rule: inShared, source: source, declared: true,
			wantRelated: map[string][]string{"ConfigMap.v1": {"shared/settings"}},
		},
		{
			name: "a v2 labelSelector without a namespace selects in all namespaces", version: v1alpha1.HookVersionV2,
			rule: byLabels, source: source, declared: true,
			wantRelated: map[string][]string{"ConfigMap.v1": {"ns/settings", "shared/settings"}},
		},
		{
			name: "a v1 labelSelector without a namespace selects in the parent's namespace", version: v1alpha1.HookVersionV1,
			rule: byLabels, source: source, declared: true,
			wantRelated: map[string][]string{"ConfigMap.v1": {"settings"}},
		},
		{
			name: "a namespaced parent sees cluster-scoped related objects", version: v1alpha1.HookVersionV1,
			rule: clusterScoped, source: source, declared: true,
			wantRelated: map[string][]string{"StorageClass.storage.k8s.io/v1": {"fast"}},
		},
		{
			name: "a v1 hook of a namespaced parent may not name another namespace", version: v1alpha1.HookVersionV1,
			rule: inShared, source: source, declared: true,
			wantErr: "a v1 hook of a namespaced parent sees its own namespace only",
		},
		{
			name: "names and a labelSelector together are an invalid answer", version: v1alpha1.HookVersionV2,
			rule:   &hookapi.RelatedResourceRule{APIVersion: "v1", Resource: "configmaps", Names: []string{"a"}, LabelSelector: &metav1.LabelSelector{}},
			source: source, declared: true,
			wantErr: "sets names together with a labelSelector or namespaceSelector",
		},
		{
			name: "without an ObjectLister the sync hook gets none, with a warning", version: v1alpha1.HookVersionV1,
			rule: byNames, declared: true, wantRelated: map[string][]string{},
			wantWarning: "customize hook asked for related objects but no target cluster is reachable; the sync hook gets none",
		},
		{
			name: "a customize hook the controller does not declare is not called", version: v1alpha1.HookVersionV1,
			rule: byNames, source: source, declared: false, wantRelated: map[string][]string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newController(withSyncVersion(tc.version))
			if tc.declared {
				withCustomize(cc)
				cc.Spec.Hooks.Customize.Version = &tc.version
			}
			customize := hookapi.CustomizeHookFunc(func(ctx context.Context, req *hookapi.CustomizeHookRequest) (*hookapi.CustomizeHookResponse, error) {
				if req.Parent.GetName() != "p" || req.Controller.Name != "things" {
					t.Errorf("customize request %+v", req)
				}
				return &hookapi.CustomizeHookResponse{RelatedResourceRules: []*hookapi.RelatedResourceRule{tc.rule}}, nil
			})
			var got *hookapi.SyncHookRequest
			sync := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
				got = req
				return &hookapi.SyncHookResponse{}, nil
			})
			in := newInput(cc, newParent(), Claimed{}, sync)
			in.Hooks.Customize = customize
			in.Resolver = mapperResolver()
			if tc.source != nil {
				in.Related = tc.source
			}
			plan, err := Compute(context.Background(), in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			related := map[string][]string{}
			for g, objs := range got.Related {
				if len(objs) == 0 {
					continue
				}
				related[g] = []string{}
				for k := range objs {
					related[g] = append(related[g], k)
				}
				sort.Strings(related[g])
			}
			if !reflect.DeepEqual(related, tc.wantRelated) {
				t.Errorf("related %v, want %v", related, tc.wantRelated)
			}
			if tc.wantWarning != "" && !containsProblem(plan.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", plan.Warnings, tc.wantWarning)
			}
			if tc.wantWarning == "" && len(plan.Warnings) != 0 {
				t.Errorf("unexpected warnings %q", plan.Warnings)
			}
		})
	}
}

func TestComputeFinalizing(t *testing.T) {
	children := Claimed{
		Owned:   []*unstructured.Unstructured{owned(cm("a", "blue"))},
		Adopt:   []*unstructured.Unstructured{cm("z", "blue")},
		Release: []*unstructured.Unstructured{owned(object("v1", "ConfigMap", parentNS, "gone", "metadata.labels.app", "q"))},
	}

	t.Run("with a finalize hook: called with finalizing, its answer passed through", func(t *testing.T) {
		var sent *hookapi.SyncHookRequest
		finalize := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
			sent = req
			return &hookapi.SyncHookResponse{Finalized: true, Status: map[string]interface{}{"phase": "gone"}}, nil
		})
		parent := deleting(newParent())
		parent.SetFinalizers([]string{definition.FinalizerPrefix + "things"})
		in := newInput(newController(withFinalize), parent, Claimed{Owned: children.Owned}, mustNotCall(t, "sync"))
		in.Hooks.Finalize = InProcess(finalize)
		plan, err := Compute(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if sent == nil || !sent.Finalizing || !reflect.DeepEqual(plan.HookRequest, sent) {
			t.Fatalf("finalize request %+v", sent)
		}
		if !plan.Finalizing || plan.Response == nil || !plan.Response.Finalized {
			t.Errorf("plan finalizing %v, response %+v", plan.Finalizing, plan.Response)
		}
		if got := summary(plan); !reflect.DeepEqual(got, []string{"Delete ConfigMap ns/a"}) {
			t.Errorf("items %q", got)
		}
	})

	t.Run("with a finalize hook and a pending foreground deletion: called, children left to the garbage collector", func(t *testing.T) {
		parent := deleting(newParent())
		parent.SetFinalizers([]string{metav1.FinalizerDeleteDependents, definition.FinalizerPrefix + "things"})
		in := newInput(newController(withFinalize), parent, Claimed{Owned: children.Owned}, mustNotCall(t, "sync"))
		in.Hooks.Finalize = InProcess(returning())
		plan, err := Compute(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Finalizing || plan.Response == nil {
			t.Fatalf("the finalize hook was not called: %+v", plan)
		}
		if got := summary(plan); !reflect.DeepEqual(got, []string{"Unchanged ConfigMap ns/a"}) {
			t.Errorf("items %q", got)
		}
	})

	t.Run("a parent that stopped matching the label selector gets the finalize hook, which manages its children", func(t *testing.T) {
		cc := newController(withFinalize)
		cc.Spec.ParentResource.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		parent := newParent()
		parent.SetFinalizers([]string{definition.FinalizerPrefix + "things"})
		in := newInput(cc, parent, Claimed{Owned: children.Owned}, mustNotCall(t, "sync"))
		in.Hooks.Finalize = InProcess(returning())
		plan, err := Compute(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Finalizing || !plan.HookRequest.Finalizing {
			t.Fatalf("the finalize hook was not called with finalizing: %+v", plan)
		}
		if got := summary(plan); !reflect.DeepEqual(got, []string{"Delete ConfigMap ns/a"}) {
			t.Errorf("items %q", got)
		}
	})

	t.Run("without a finalize hook: the sync hook is called, as in Metacontroller, and children are left to the garbage collector", func(t *testing.T) {
		plan, err := Compute(context.Background(), newInput(newController(), deleting(newParent()), children, returning()))
		if err != nil {
			t.Fatal(err)
		}
		if plan.HookRequest == nil || plan.Response == nil || plan.Finalizing || plan.HookRequest.Finalizing {
			t.Errorf("plan %+v", plan)
		}
		if got := summary(plan); !reflect.DeepEqual(got, []string{"Unchanged ConfigMap ns/a", "Unchanged ConfigMap ns/gone"}) {
			t.Errorf("items %q", got)
		}
		if !reflect.DeepEqual(plan.Warnings, []string{"parent is being deleted; its children are left to the garbage collector"}) {
			t.Errorf("warnings %q", plan.Warnings)
		}
	})
}

func TestComputeClusterScopedParent(t *testing.T) {
	parent := newParent()
	parent.SetNamespace("")
	children := Claimed{Owned: []*unstructured.Unstructured{
		owned(object("v1", "ConfigMap", "a", "cfg")),
		owned(object("v1", "ConfigMap", "b", "cfg")),
	}}
	var req *hookapi.SyncHookRequest
	sync := hookapi.SyncHookFunc(func(ctx context.Context, r *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		req = r
		return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{
			object("v1", "ConfigMap", "a", "cfg"),
			object("v1", "Namespace", "", "team"),
		}}, nil
	})
	plan, err := Compute(context.Background(), newInput(newController(), parent, children, sync))
	if err != nil {
		t.Fatal(err)
	}
	// Under a cluster-scoped parent even v1 keys need the namespace, as in
	// Metacontroller, or the two ConfigMaps named cfg would collide.
	if g := req.Children["ConfigMap.v1"]; len(g) != 2 || g["a/cfg"] == nil || g["b/cfg"] == nil {
		t.Errorf("ConfigMap group %v", g)
	}
	want := []string{"Unchanged ConfigMap a/cfg", "Delete ConfigMap b/cfg", "Create Namespace team"}
	if got := summary(plan); !reflect.DeepEqual(got, want) {
		t.Errorf("items %q, want %q", got, want)
	}
}

func TestComputeSendsEmptyGroupsForDeclaredResources(t *testing.T) {
	apps, core, example := schema.GroupVersion{Group: "apps", Version: "v1"}, schema.GroupVersion{Version: "v1"},
		schema.GroupVersion{Group: "example.com", Version: "v1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{apps, core, example})
	m.Add(apps.WithKind("Deployment"), meta.RESTScopeNamespace)
	for _, k := range []string{"ConfigMap", "Secret", "Service"} {
		m.Add(core.WithKind(k), meta.RESTScopeNamespace)
	}
	m.Add(core.WithKind("Namespace"), meta.RESTScopeRoot)
	m.Add(example.WithKind("Thing"), meta.RESTScopeNamespace)

	var req *hookapi.SyncHookRequest
	sync := hookapi.SyncHookFunc(func(ctx context.Context, r *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		req = r
		return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue")}}, nil
	})
	in := newInput(newController(), newParent(), Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue"))}}, sync)
	in.Resolver = definition.RESTMapperResolver(m)
	plan, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for g := range req.Children {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	want := []string{"ConfigMap.v1", "Deployment.apps/v1", "Namespace.v1", "Secret.v1", "Service.v1"}
	if !reflect.DeepEqual(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	if got := summary(plan); !reflect.DeepEqual(got, []string{"Unchanged ConfigMap ns/a"}) {
		t.Errorf("items %q", got)
	}
}

func TestComputeWarnsAboutDeclaredHooksItCannotCall(t *testing.T) {
	in := newInput(newController(withCustomize), newParent(), Claimed{}, returning())
	plan, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !containsProblem(plan.Warnings, "declares a customize hook but it is not available here") {
		t.Errorf("warnings %q", plan.Warnings)
	}

	in = newInput(newController(withFinalize), deleting(newParent()), Claimed{}, returning())
	plan, err = Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !containsProblem(plan.Warnings, "declares a finalize hook but it is not available here") {
		t.Errorf("warnings %q", plan.Warnings)
	}
}

// An in-process hook (Go code) may answer with Go values a webhook never
// sends: an int, a []string. The plan holds them as a webhook's decoded
// answer would, so that the status write and the children's apply can
// deep-copy them (runtime.DeepCopyJSON panics on an int).
func TestAnInProcessHookAnswersAsAWebhookWould(t *testing.T) {
	child := cm("a", "blue")
	child.Object["data"] = map[string]interface{}{"color": "blue"}
	child.Object["spec"] = map[string]interface{}{"ports": []string{"http"}, "count": 2}
	hook := hookapi.SyncHookFunc(func(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		return &hookapi.SyncHookResponse{
			Status:   map[string]interface{}{"replicas": 3, "names": []string{"a"}},
			Children: []*unstructured.Unstructured{child},
		}, nil
	})
	plan, err := Compute(context.Background(), newInput(newController(), newParent(), Claimed{}, hook))
	if err != nil {
		t.Fatal(err)
	}
	status := runtime.DeepCopyJSON(plan.Response.Status)
	if got := status["replicas"]; got != int64(3) {
		t.Errorf("status.replicas = %#v, want int64(3) as a webhook's answer decodes", got)
	}
	if got := status["names"]; !reflect.DeepEqual(got, []interface{}{"a"}) {
		t.Errorf("status.names = %#v, want []interface{}{\"a\"}", got)
	}
	for _, desired := range plan.Desired {
		runtime.DeepCopyJSON(desired.Object)
	}
}
