// Package sharedinformers is the loop's shared informers: one per resource,
// reference-counted across every controller that uses the resource (as
// parent, child or related resource), indexed by controller and orphans,
// the lister the engine reads children and related objects through, and
// the lending of those caches to readers outside the loop (Caches).
package sharedinformers

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
)

// Pool holds the running shared informers, one per resource, each with
// lean objects in its cache and the indexes of childIndexers.
type Pool struct {
	client dynamic.Interface
	// stop stops every informer of the pool: the loop is done.
	stop <-chan struct{}

	mu sync.Mutex
	// informers are the running shared informers, by resource.
	informers map[schema.GroupVersionResource]*sharedInformer
	// listErrors holds each shared informer's last list or watch error;
	// the informers' reflectors write it, outside mu.
	listErrors sync.Map
}

// sharedInformer is one resource's informer and how many controllers use
// it.
type sharedInformer struct {
	informers.GenericInformer
	refs int
	stop context.CancelFunc
}

// NewPool returns a Pool whose informers list and watch through client
// until stop is closed.
func NewPool(client dynamic.Interface, stop <-chan struct{}) *Pool {
	return &Pool{client: client, stop: stop, informers: map[schema.GroupVersionResource]*sharedInformer{}}
}

// Acquire returns the shared informer of gvr, started, with lean objects
// in its cache and the indexes by controller, and counts one more user of
// it. Every controller that uses gvr (as parent, child or related
// resource) shares it, and releases it when it is done: the last release
// stops it, as Metacontroller reference-counts and closes its informers,
// so that a deleted controller, or a related rule no parent asks for any
// more, leaves no watch behind.
func (p *Pool) Acquire(gvr schema.GroupVersionResource) informers.GenericInformer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.informers[gvr]; ok {
		s.refs++
		return s.GenericInformer
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(p.client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
	// None of these fails on an informer not started yet.
	_ = inf.Informer().SetTransform(leanTransform)
	_ = inf.Informer().AddIndexers(childIndexers)
	// An informer whose list fails (a resource the server may not list)
	// never syncs; what it was told is kept to say why.
	_ = inf.Informer().SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		p.listErrors.Store(gvr, err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	ctx, stop := context.WithCancel(wait.ContextForChannel(p.stop))
	p.informers[gvr] = &sharedInformer{GenericInformer: inf, refs: 1, stop: stop}
	informersRunning.Inc()
	go inf.Informer().RunWithContext(ctx)
	return inf
}

// Release gives back one use of gvr's informer; the last stops it.
func (p *Pool) Release(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.informers[gvr]
	if !ok {
		return
	}
	if s.refs--; s.refs > 0 {
		return
	}
	s.stop()
	informersRunning.Dec()
	delete(p.informers, gvr)
	p.listErrors.Delete(gvr)
}

// LastListError is the last error the informer of gvr had listing or
// watching, or nil.
func (p *Pool) LastListError(gvr schema.GroupVersionResource) error {
	if err, ok := p.listErrors.Load(gvr); ok {
		return err.(error)
	}
	return nil
}

// synced is the indexer of gvr's informer, when the pool runs one and it
// has synced.
func (p *Pool) synced(gvr schema.GroupVersionResource) (cache.Indexer, bool) {
	p.mu.Lock()
	s, ok := p.informers[gvr]
	p.mu.Unlock()
	if !ok || !s.Informer().HasSynced() {
		return nil, false
	}
	return s.Informer().GetIndexer(), true
}

func leanTransform(obj interface{}) (interface{}, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fieldowner.Lean(u)
	}
	return obj, nil
}
