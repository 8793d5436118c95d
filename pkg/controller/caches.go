package controller

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
)

// Caches lends the running loop's informer caches of child resources to
// readers outside the loop: a fleet preview (pkg/syncrequest) on the
// replica that runs the loop then reads the children of thousands of
// parents from memory the loop holds anyway, instead of listing them. It
// is empty where no loop runs (another replica leads, or between
// leadership terms), and the reader lists as before. The caller's rights
// are the reader's to check: the caches hold what the server may read.
type Caches struct {
	manager atomic.Pointer[Manager]
}

// Children returns an index of gvr's objects by controller, when this
// replica's loop watches gvr and its cache has synced.
func (c *Caches) Children(gvr schema.GroupVersionResource) (engine.ChildIndex, bool) {
	if c == nil {
		return nil, false
	}
	m := c.manager.Load()
	if m == nil {
		return nil, false
	}
	m.informersMu.Lock()
	s, ok := m.informers[gvr]
	m.informersMu.Unlock()
	if !ok || !s.Informer().HasSynced() {
		return nil, false
	}
	return indexerIndex{s.Informer().GetIndexer()}, true
}

// Ownership is the loop's field-ownership comparison, which remembers the
// children it found converged (fieldowner.Unchanged): a preview of a
// converged fleet compares each unchanged child again only when the loop
// has not; nil where no loop runs. An unchanged child's lines are never
// shown in a fleet preview, so a remembered answer, which has none, shows
// the same.
func (c *Caches) Ownership() engine.FieldOwnership {
	if c == nil {
		return nil
	}
	if m := c.manager.Load(); m != nil {
		return m.ownership()
	}
	return nil
}

// lend makes m's caches the ones lent until it is done.
func (c *Caches) lend(ctx context.Context, m *Manager) {
	if c == nil {
		return
	}
	c.manager.Store(m)
	go func() {
		<-ctx.Done()
		c.manager.CompareAndSwap(m, nil)
	}()
}

// indexerIndex is an informer's indexer with childIndexers, as an
// engine.ChildIndex of its one resource.
type indexerIndex struct{ indexer cache.Indexer }

func (i indexerIndex) Candidates(_ context.Context, _ schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return candidates(i.indexer, namespace, owner)
}

func (i indexerIndex) Get(_ context.Context, _ schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return cached(i.indexer, namespace, name)
}
