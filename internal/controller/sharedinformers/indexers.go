package sharedinformers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const (
	// indexController indexes objects by the UID of their controller, so
	// that a sync reads its own children, not its namespace's.
	indexController = "controller-uid"
	// indexOrphans indexes objects without a controller by namespace, and
	// all of them under allNamespaces too: the ones a parent may adopt. A
	// namespaced parent adopts in its own namespace; a cluster-scoped one,
	// as Metacontroller's ListOrphans("") has it, in every namespace and
	// among cluster-scoped objects.
	indexOrphans = "orphans"
	// allNamespaces is the orphan index's key for every orphan: not a
	// namespace name (those are DNS labels), nor "", which is the key of
	// cluster-scoped objects.
	allNamespaces = "*"
)

var childIndexers = cache.Indexers{
	indexController: func(obj interface{}) ([]string, error) {
		if ref := metav1.GetControllerOfNoCopy(obj.(metav1.Object)); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return nil, nil
	},
	indexOrphans: func(obj interface{}) ([]string, error) {
		o := obj.(metav1.Object)
		if metav1.GetControllerOfNoCopy(o) != nil {
			return nil, nil
		}
		return []string{o.GetNamespace(), allNamespaces}, nil
	},
}

// ControlledBy are the objects of a pool informer's indexer whose
// controller has the UID owner.
func ControlledBy(indexer cache.Indexer, owner string) ([]interface{}, error) {
	return indexer.ByIndex(indexController, owner)
}

// candidates are the objects of indexer that owner controls and the
// orphans, from its indexes (childIndexers).
func candidates(indexer cache.Indexer, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	owned, err := indexer.ByIndex(indexController, string(owner))
	if err != nil {
		return nil, err
	}
	orphansOf := namespace
	if namespace == "" {
		orphansOf = allNamespaces
	}
	orphans, err := indexer.ByIndex(indexOrphans, orphansOf)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(owned)+len(orphans))
	for _, list := range [][]interface{}{owned, orphans} {
		for _, o := range list {
			u := o.(*unstructured.Unstructured)
			// A controller UID is unique; its namespace is checked all the
			// same, as the ControllerRef rules want.
			if namespace == "" || u.GetNamespace() == namespace {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// cached is indexer's object namespace/name, or nil.
func cached(indexer cache.Indexer, namespace, name string) (*unstructured.Unstructured, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := indexer.GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	return obj.(*unstructured.Unstructured), nil
}
