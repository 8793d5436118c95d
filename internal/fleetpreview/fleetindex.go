package fleetpreview

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/syncrequest"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// pageChildren are the children of a page's parents, as the caller may
// list them: from the loop's caches where this replica holds them, or else
// listed once per child resource and namespace, in chunks, keeping only
// the page's parents' children and the orphans, indexed by controller. A
// page of a hundred parents in one namespace costs one list per child
// resource at most, not one per parent, and holds its own parents'
// children, not the namespace's; each parent's claim reads only its own
// children and the orphans, as the loop's informer indexes give them
// (engine.ChildIndex). The objects are shared by the parents' syncs, which
// only read them.
type pageChildren struct {
	// cluster is read with the caller's rights, which authz checks.
	cluster *target.Cluster
	authz   authorizer.Authorizer
	caches  syncrequest.ChildCaches
	// owners are the uids of the page's parents.
	owners map[types.UID]bool

	mu    sync.Mutex
	lists map[pageListKey]*pageList
}

type pageListKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

type pageList struct {
	once    sync.Once
	err     error
	owned   map[types.UID][]*unstructured.Unstructured
	orphans []*unstructured.Unstructured
	byName  map[string]*unstructured.Unstructured
}

// childChunk is how many children one list request of a page reads.
const childChunk = 500

func newPageChildren(cluster *target.Cluster, authz authorizer.Authorizer, caches syncrequest.ChildCaches, owners map[types.UID]bool) *pageChildren {
	return &pageChildren{cluster: cluster, authz: authz, caches: caches, owners: owners, lists: map[pageListKey]*pageList{}}
}

// cached is the loop's index of gvr, when the caller may list gvr in
// namespace and this replica caches it.
func (p *pageChildren) cached(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (engine.ChildIndex, bool, error) {
	if p.caches == nil {
		return nil, false, nil
	}
	index, ok := p.caches.Children(gvr)
	if !ok {
		return nil, false, nil
	}
	if err := syncrequest.Authorize(ctx, p.authz, "list", gvr, namespace, ""); err != nil {
		return nil, false, err
	}
	return index, true, nil
}

// list lists gvr in namespace on first use; the parents that want it
// meanwhile wait for that one list.
func (p *pageChildren) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (*pageList, error) {
	key := pageListKey{gvr, namespace}
	p.mu.Lock()
	l, ok := p.lists[key]
	if !ok {
		l = &pageList{}
		p.lists[key] = l
	}
	p.mu.Unlock()
	l.once.Do(func() { l.err = p.fill(ctx, l, gvr, namespace) })
	return l, l.err
}

// fill lists gvr in namespace into l, chunk by chunk, keeping the
// children of the page's parents and the orphans.
func (p *pageChildren) fill(ctx context.Context, l *pageList, gvr schema.GroupVersionResource, namespace string) error {
	if err := syncrequest.Authorize(ctx, p.authz, "list", gvr, namespace, ""); err != nil {
		return err
	}
	l.owned = map[types.UID][]*unstructured.Unstructured{}
	l.byName = map[string]*unstructured.Unstructured{}
	opts := metav1.ListOptions{Limit: childChunk}
	for {
		list, err := p.cluster.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("can't list %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			// Its own struct, so that the chunk's array is not kept
			// alive by the few objects kept.
			obj := &unstructured.Unstructured{Object: list.Items[i].Object}
			ref := metav1.GetControllerOfNoCopy(obj)
			switch {
			case ref == nil:
				l.orphans = append(l.orphans, obj)
			case p.owners[ref.UID]:
				l.owned[ref.UID] = append(l.owned[ref.UID], obj)
			default:
				// Another parent's, not this page's.
				continue
			}
			// As lean as the loop's cache keeps them, so that a hook
			// gets the same request from a preview as from the loop.
			fieldowner.Lean(obj)
			l.byName[obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// Candidates are the objects of gvr in namespace that owner controls, and
// the orphans.
func (p *pageChildren) Candidates(ctx context.Context, gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	if index, ok, err := p.cached(ctx, gvr, namespace); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return index.Candidates(ctx, gvr, namespace, owner)
	}
	l, err := p.list(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	owned := l.owned[owner]
	out := make([]*unstructured.Unstructured, 0, len(owned)+len(l.orphans))
	for _, obj := range owned {
		// A controller uid is unique; its namespace is checked all the
		// same, as the ControllerRef rules want.
		if namespace == "" || obj.GetNamespace() == namespace {
			out = append(out, obj)
		}
	}
	return append(out, l.orphans...), nil
}

// Get returns the listed object of gvr called namespace/name, or nil.
func (p *pageChildren) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if index, ok, err := p.cached(ctx, gvr, namespace); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return index.Get(ctx, gvr, namespace, name)
	}
	l, err := p.list(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	if obj, ok := l.byName[namespace+"/"+name]; ok {
		return obj, nil
	}
	// Another parent's child, of which the page keeps no copy, or none:
	// asked for by name, as the caller may list it here.
	obj, err := p.cluster.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}
