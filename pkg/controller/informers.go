package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
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

// sharedInformer is one resource's informer and how many controllers use
// it.
type sharedInformer struct {
	informers.GenericInformer
	refs int
	stop context.CancelFunc
}

// acquire returns the manager's shared informer of gvr, started, with lean
// objects in its cache and the indexes by controller, and counts one more
// user of it. Every controller that uses gvr (as parent, child or related
// resource) shares it, and releases it when it is done: the last release
// stops it, as Metacontroller reference-counts and closes its informers,
// so that a deleted controller, or a related rule no parent asks for any
// more, leaves no watch behind.
func (m *Manager) acquire(gvr schema.GroupVersionResource) informers.GenericInformer {
	m.informersMu.Lock()
	defer m.informersMu.Unlock()
	if s, ok := m.informers[gvr]; ok {
		s.refs++
		return s.GenericInformer
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(m.cfg.Dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
	// None of these fails on an informer not started yet.
	_ = inf.Informer().SetTransform(leanTransform)
	_ = inf.Informer().AddIndexers(childIndexers)
	// An informer whose list fails (a resource the server may not list)
	// never syncs; what it was told is kept to say why.
	_ = inf.Informer().SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		m.listErrors.Store(gvr, err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	ctx, stop := context.WithCancel(wait.ContextForChannel(m.stopCh))
	m.informers[gvr] = &sharedInformer{GenericInformer: inf, refs: 1, stop: stop}
	informersRunning.Inc()
	go inf.Informer().RunWithContext(ctx)
	return inf
}

// release gives back one use of gvr's informer; the last stops it.
func (m *Manager) release(gvr schema.GroupVersionResource) {
	m.informersMu.Lock()
	defer m.informersMu.Unlock()
	s, ok := m.informers[gvr]
	if !ok {
		return
	}
	if s.refs--; s.refs > 0 {
		return
	}
	s.stop()
	informersRunning.Dec()
	delete(m.informers, gvr)
	m.listErrors.Delete(gvr)
}

// lastListError is the last error the informer of gvr had listing or
// watching, or nil.
func (m *Manager) lastListError(gvr schema.GroupVersionResource) error {
	if err, ok := m.listErrors.Load(gvr); ok {
		return err.(error)
	}
	return nil
}

func leanTransform(obj interface{}) (interface{}, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fieldowner.Lean(u)
	}
	return obj, nil
}
