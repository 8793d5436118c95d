package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/pkg/fieldowner"
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

// informer returns the manager's shared informer of gvr, set up once: lean
// objects in its cache and the indexes by controller. Every controller
// that uses gvr (as parent, child or related resource) shares it.
func (m *Manager) informer(gvr schema.GroupVersionResource) informers.GenericInformer {
	m.informersMu.Lock()
	defer m.informersMu.Unlock()
	inf := m.factory.ForResource(gvr)
	if !m.configured[gvr] {
		m.configured[gvr] = true
		// Both fail only on an informer that already started, which a
		// first ForResource never returns.
		_ = inf.Informer().SetTransform(leanTransform)
		_ = inf.Informer().AddIndexers(childIndexers)
		// An informer whose list fails (a resource the server may not
		// list) never syncs; what it was told is kept to say why.
		_ = inf.Informer().SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			m.listErrors.Store(gvr, err)
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	return inf
}

// lastListError is the last error the informer of gvr had listing or
// watching, or nil.
func (m *Manager) lastListError(gvr schema.GroupVersionResource) error {
	if err, ok := m.listErrors.Load(gvr); ok {
		return err.(error)
	}
	return nil
}

// startInformers starts the shared informers not started yet. It holds the
// same lock as informer, so that none starts before it is set up.
func (m *Manager) startInformers() {
	m.informersMu.Lock()
	defer m.informersMu.Unlock()
	m.factory.Start(m.stopCh)
}

func leanTransform(obj interface{}) (interface{}, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fieldowner.Lean(u)
	}
	return obj, nil
}
