package sharedinformers

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// Caches lends the running loop's informer caches of child resources to
// readers outside the loop: a fleet preview (internal/syncrequest) on the
// replica that runs the loop then reads the children of thousands of
// parents from memory the loop holds anyway, instead of listing them. It
// is empty where no loop runs (another replica leads, or between
// leadership terms), and the reader lists as before. The caller's rights
// are the reader's to check: the caches hold what the server may read.
type Caches struct {
	lent atomic.Pointer[lent]
}

// lent is what a running loop lends.
type lent struct {
	pool      *Pool
	ownership engine.FieldOwnership
}

// Children returns an index of gvr's objects by controller, when this
// replica's loop watches gvr and its cache has synced.
func (c *Caches) Children(gvr schema.GroupVersionResource) (engine.ChildIndex, bool) {
	if c == nil {
		return nil, false
	}
	l := c.lent.Load()
	if l == nil {
		return nil, false
	}
	indexer, ok := l.pool.synced(gvr)
	if !ok {
		return nil, false
	}
	return indexerIndex{indexer}, true
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
	if l := c.lent.Load(); l != nil {
		return l.ownership
	}
	return nil
}

// Lend makes pool's caches, and the loop's ownership (nil for none), the
// ones lent until ctx is done.
func (c *Caches) Lend(ctx context.Context, pool *Pool, ownership engine.FieldOwnership) {
	if c == nil {
		return
	}
	l := &lent{pool: pool, ownership: ownership}
	c.lent.Store(l)
	go func() {
		<-ctx.Done()
		c.lent.CompareAndSwap(l, nil)
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
