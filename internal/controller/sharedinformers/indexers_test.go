package sharedinformers

import (
	"slices"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestOrphanIndexServesEveryNamespaceToClusterScopedParents: a namespaced
// parent finds the orphans of its own namespace; a cluster-scoped one (its
// namespace is "") finds them in every namespace and among cluster-scoped
// objects, as Metacontroller's ListOrphans("") does. Owned objects are no
// orphans.
func TestOrphanIndexServesEveryNamespaceToClusterScopedParents(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, childIndexers)
	obj := func(ns, name string, owned bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName(name)
		if owned {
			u.SetOwnerReferences([]metav1.OwnerReference{{Name: "p", UID: "parent-uid", Controller: ptr.To(true)}})
		}
		return u
	}
	for _, o := range []*unstructured.Unstructured{
		obj("a", "orphan-a", false), obj("b", "orphan-b", false), obj("", "orphan-cluster", false), obj("a", "owned", true),
	} {
		if err := indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"a", []string{"orphan-a"}},
		{"b", []string{"orphan-b"}},
		{"", []string{"orphan-cluster"}},
		{allNamespaces, []string{"orphan-a", "orphan-b", "orphan-cluster"}},
	} {
		objs, err := indexer.ByIndex(indexOrphans, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.(metav1.Object).GetName())
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("orphans under %q: %v, want %v", tc.key, got, tc.want)
		}
	}
}
