package engine

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestClaim(t *testing.T) {
	selector := labels.SelectorFromSet(labels.Set{"app": "p"})
	other := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Thing", Name: "q", UID: "uid-q", Controller: ptr.To(true),
		}})
		return obj
	}
	nonController := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "uid-x"}})
		return obj
	}
	relabel := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj.SetLabels(map[string]string{"app": "q"})
		return obj
	}

	for _, tc := range []struct {
		name     string
		parent   *unstructured.Unstructured
		child    *unstructured.Unstructured
		canAdopt bool
		want     string
	}{
		{"owned and matching is owned", newParent(), owned(cm("a", "x")), true, "owned"},
		{"owned and matching is owned even while being deleted", newParent(), deleting(owned(cm("a", "x"))), true, "owned"},
		{"owned and not matching is released", newParent(), relabel(owned(cm("a", "x"))), true, "release"},
		{"owned and not matching is not released by a parent being deleted", deleting(newParent()), relabel(owned(cm("a", "x"))), true, "ignored"},
		{"orphan matching is adopted", newParent(), cm("a", "x"), true, "adopt"},
		{"orphan with only a non-controller owner is adopted", newParent(), nonController(cm("a", "x")), true, "adopt"},
		{"orphan matching is not adopted when adoption is not allowed", newParent(), cm("a", "x"), false, "ignored"},
		{"orphan being deleted is not adopted", newParent(), deleting(cm("a", "x")), true, "ignored"},
		{"orphan is not adopted by a parent being deleted", deleting(newParent()), cm("a", "x"), true, "ignored"},
		{"orphan not matching is ignored", newParent(), relabel(cm("a", "x")), true, "ignored"},
		{"controlled by another owner is foreign", newParent(), other(cm("a", "x")), true, "foreign"},
		{"controlled by another owner and not matching is another's, not a conflict", newParent(), relabel(other(cm("a", "x"))), true, "others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Claim(tc.parent, selector, []*unstructured.Unstructured{tc.child, nil}, tc.canAdopt)
			got := map[string][]*unstructured.Unstructured{"owned": c.Owned, "adopt": c.Adopt, "release": c.Release, "foreign": c.Foreign, "others": c.Others}
			n := 0
			for bucket, objs := range got {
				n += len(objs)
				if len(objs) > 0 && bucket != tc.want {
					t.Errorf("claimed as %s, want %s", bucket, tc.want)
				}
			}
			if tc.want == "ignored" && n != 0 {
				t.Errorf("claimed %+v, want ignored", c)
			}
			if tc.want != "ignored" && (n != 1 || got[tc.want][0] != tc.child) {
				t.Errorf("claimed %+v, want the child in %s", c, tc.want)
			}
		})
	}
}

func TestClaimSortsAndNilSelectorSelectsNothing(t *testing.T) {
	c := Claim(newParent(), selectorOf(t), []*unstructured.Unstructured{cm("c", "x"), cm("a", "x"), object("apps/v1", "Deployment", parentNS, "z")}, true)
	var got []string
	for _, o := range c.Adopt {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := []string{"Deployment/z", "ConfigMap/a", "ConfigMap/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("adopt %v, want %v", got, want)
	}
	if c := Claim(newParent(), nil, []*unstructured.Unstructured{cm("a", "x")}, true); len(c.Adopt) != 0 {
		t.Errorf("a nil selector adopted %v", c.Adopt)
	}
}

func selectorOf(t *testing.T) labels.Selector {
	t.Helper()
	s, err := ParentSelector(compile(newController()), newParent())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParentSelector(t *testing.T) {
	withSelector := func(sel interface{}) *unstructured.Unstructured {
		p := newParent()
		if sel == nil {
			unstructured.RemoveNestedField(p.Object, "spec", "selector")
		} else {
			p.Object["spec"].(map[string]interface{})["selector"] = sel
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		controller *v1alpha1.CompositeController
		parent     *unstructured.Unstructured
		want       string
		wantErr    string
	}{
		{"generateSelector selects by controller-uid", newController(withGenerateSelector), newParent(), "controller-uid=" + parentUID, ""},
		{"generateSelector ignores a missing spec.selector", newController(withGenerateSelector), withSelector(nil), "controller-uid=" + parentUID, ""},
		{"spec.selector matchLabels", newController(), newParent(), "app=p", ""},
		{"spec.selector matchExpressions", newController(), withSelector(map[string]interface{}{
			"matchExpressions": []interface{}{map[string]interface{}{"key": "tier", "operator": "In", "values": []interface{}{"web", "db"}}},
		}), "tier in (db,web)", ""},
		{"missing spec.selector", newController(), withSelector(nil), "", "parent has no spec.selector; set spec.generateSelector on the CompositeController"},
		{"empty spec.selector", newController(), withSelector(map[string]interface{}{}), "", "parent has no spec.selector; set spec.generateSelector on the CompositeController"},
		{"no spec at all", newController(), &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "X"}}, "", "parent has no spec.selector"},
		{"spec.selector not an object", newController(), withSelector("app=p"), "", "not an object"},
		{"invalid operator", newController(), withSelector(map[string]interface{}{
			"matchExpressions": []interface{}{map[string]interface{}{"key": "tier", "operator": "Near"}},
		}), "", "parent's spec.selector is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := ParentSelector(compile(tc.controller), tc.parent)
			if tc.wantErr != "" {
				if err == nil || !containsProblem([]string{err.Error()}, tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.String() != tc.want {
				t.Errorf("selector %q, want %q", sel, tc.want)
			}
		})
	}
}

func TestControllerRef(t *testing.T) {
	ref := ControllerRef(newParent())
	if ref.APIVersion != "example.com/v1" || ref.Kind != "Thing" || ref.Name != "p" || ref.UID != parentUID ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ControllerRef = %+v", ref)
	}
}

func TestChildKey(t *testing.T) {
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{cm("a", "x"), "ConfigMap ns/a"},
		{object("apps/v1", "Deployment", "ns", "web"), "Deployment.apps ns/web"},
		{object("apps/v1beta1", "Deployment", "ns", "web"), "Deployment.apps ns/web"},
		{object("v1", "Namespace", "", "team"), "Namespace team"},
	} {
		if got := ChildKey(tc.obj); got != tc.want {
			t.Errorf("ChildKey(%s) = %q, want %q", describe(tc.obj), got, tc.want)
		}
	}
}
