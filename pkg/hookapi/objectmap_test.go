package hookapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestGroupKey(t *testing.T) {
	for _, tc := range []struct{ apiVersion, kind, want string }{
		{"v1", "Pod", "Pod.v1"},
		{"apps/v1", "Deployment", "Deployment.apps/v1"},
		{"example.com/v1alpha1", "Thing", "Thing.example.com/v1alpha1"},
	} {
		if got := GroupKey(tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("GroupKey(%q, %q) = %q, want %q", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

func TestObjectKeysByHookVersion(t *testing.T) {
	namespacedParent := obj("example.com/v1", "Thing", "ns", "p")
	clusterParent := obj("example.com/v1", "ClusterThing", "", "p")
	pod := obj("v1", "Pod", "ns", "a")
	namespace := obj("v1", "Namespace", "", "a")

	for _, tc := range []struct {
		name         string
		version      v1alpha1.HookVersion
		parent, obj  *unstructured.Unstructured
		wantKey      string
		wantRelative string
	}{
		{"v1 namespaced child of namespaced parent is keyed by name", v1alpha1.HookVersionV1, namespacedParent, pod, "a", "a"},
		{"v1 namespaced child of cluster-scoped parent needs its namespace", v1alpha1.HookVersionV1, clusterParent, pod, "a", "ns/a"},
		{"v1 cluster-scoped child is keyed by name", v1alpha1.HookVersionV1, clusterParent, namespace, "a", "a"},
		{"empty version behaves as v1", "", clusterParent, pod, "a", "ns/a"},
		{"v2 namespaced child is keyed by namespace/name", v1alpha1.HookVersionV2, namespacedParent, pod, "ns/a", "ns/a"},
		{"v2 namespaced child of cluster-scoped parent", v1alpha1.HookVersionV2, clusterParent, pod, "ns/a", "ns/a"},
		{"v2 cluster-scoped child is keyed by name", v1alpha1.HookVersionV2, clusterParent, namespace, "a", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectKey(tc.version, tc.obj); got != tc.wantKey {
				t.Errorf("ObjectKey = %q, want %q", got, tc.wantKey)
			}
			if got := RelativeObjectKey(tc.version, tc.parent, tc.obj); got != tc.wantRelative {
				t.Errorf("RelativeObjectKey = %q, want %q", got, tc.wantRelative)
			}
		})
	}
}

func TestInsertV1AndV2JSON(t *testing.T) {
	pod := obj("v1", "Pod", "ns", "a")
	v1 := RelativeObjectMap{}
	v1.Insert(v1alpha1.HookVersionV1, pod)
	v2 := RelativeObjectMap{}
	v2.Insert(v1alpha1.HookVersionV2, pod)

	for _, tc := range []struct {
		m    RelativeObjectMap
		want string
	}{
		{v1, `{"Pod.v1":{"a":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns"}}}}`},
		{v2, `{"Pod.v1":{"ns/a":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns"}}}}`},
		{nil, `{}`},
		{RelativeObjectMap{"Pod.v1": nil}, `{"Pod.v1":{}}`},
	} {
		got, err := json.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}

func TestInsertRelativeUnderClusterScopedParent(t *testing.T) {
	parent := obj("example.com/v1", "ClusterThing", "", "p")
	m := RelativeObjectMap{}
	// Two pods with the same name in different namespaces must not collide.
	m.InsertRelative(v1alpha1.HookVersionV1, parent, obj("v1", "Pod", "a", "web"))
	m.InsertRelative(v1alpha1.HookVersionV1, parent, obj("v1", "Pod", "b", "web"))
	if got := len(m["Pod.v1"]); got != 2 {
		t.Fatalf("got %d pods, want 2: %v", got, m)
	}
	if m["Pod.v1"]["b/web"].GetNamespace() != "b" {
		t.Errorf("pod b/web not found: %v", m)
	}
}

func TestListIsSortedAndSkipsNil(t *testing.T) {
	m := RelativeObjectMap{}
	for _, o := range []*unstructured.Unstructured{
		obj("v1", "Pod", "ns", "c"),
		obj("apps/v1", "Deployment", "ns", "z"),
		obj("v1", "Pod", "ns", "a"),
		obj("v1", "ConfigMap", "ns", "b"),
	} {
		m.Insert(v1alpha1.HookVersionV2, o)
	}
	m.InitGroup("v1", "Secret")
	m["Pod.v1"]["ns/nil"] = nil

	var got []string
	for i := 0; i < 5; i++ {
		got = got[:0]
		for _, o := range m.List() {
			got = append(got, o.GetKind()+"/"+o.GetName())
		}
		want := []string{"ConfigMap/b", "Deployment/z", "Pod/a", "Pod/c"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("List() = %v, want %v", got, want)
		}
	}
}
