package sharedinformers

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// Lister serves one parent loop's children and related objects from
// shared informers: the children's, which the loop holds for as long as
// it runs, and the related resources', which related starts the first
// time a rule names one and waits for.
type Lister struct {
	children map[schema.GroupVersionResource]informers.GenericInformer
	related  func(ctx context.Context, gvr schema.GroupVersionResource) (informers.GenericInformer, error)
}

var (
	_ engine.ObjectLister = &Lister{}
	_ engine.ChildIndex   = &Lister{}
)

// NewLister returns the lister of a parent loop with the informers of
// its children, and related to get a related resource's.
func NewLister(children map[schema.GroupVersionResource]informers.GenericInformer,
	related func(ctx context.Context, gvr schema.GroupVersionResource) (informers.GenericInformer, error)) *Lister {
	return &Lister{children: children, related: related}
}

func (l *Lister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	inf, err := l.informerOf(ctx, gvr)
	if err != nil {
		return nil, err
	}
	var objs []interface{}
	lister := inf.Lister()
	if namespace == "" {
		objs, err = listAll(lister, selector)
	} else {
		objs, err = listNamespace(lister, namespace, selector)
	}
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*unstructured.Unstructured))
	}
	return out, nil
}

// Candidates lists the objects of gvr that owner controls and the orphans,
// from the informer's indexes: what a sync reads grows with the parent's
// own children, not with its namespace. A namespace of "" (a cluster-scoped
// parent) reads the orphans of every namespace, which such a parent may
// adopt, as the /sync preview, which lists everything, says it would.
func (l *Lister) Candidates(ctx context.Context, gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	inf, err := l.informerOf(ctx, gvr)
	if err != nil {
		return nil, err
	}
	return candidates(inf.Informer().GetIndexer(), namespace, owner)
}

// Get returns the cached object gvr namespace/name, or nil.
func (l *Lister) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	inf, err := l.informerOf(ctx, gvr)
	if err != nil {
		return nil, err
	}
	return cached(inf.Informer().GetIndexer(), namespace, name)
}

func (l *Lister) informerOf(ctx context.Context, gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	if inf, ok := l.children[gvr]; ok {
		return inf, nil
	}
	return l.related(ctx, gvr)
}

func (l *Lister) Namespaces(ctx context.Context, selector labels.Selector) ([]string, error) {
	inf, err := l.related(ctx, definition.Namespaces)
	if err != nil {
		return nil, err
	}
	objs, err := listAll(inf.Lister(), selector)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.(*unstructured.Unstructured).GetName())
	}
	return names, nil
}

func listAll(lister cache.GenericLister, selector labels.Selector) ([]interface{}, error) {
	objs, err := lister.List(selector)
	out := make([]interface{}, len(objs))
	for i := range objs {
		out[i] = objs[i]
	}
	return out, err
}

func listNamespace(lister cache.GenericLister, namespace string, selector labels.Selector) ([]interface{}, error) {
	objs, err := lister.ByNamespace(namespace).List(selector)
	out := make([]interface{}, len(objs))
	for i := range objs {
		out[i] = objs[i]
	}
	return out, err
}
