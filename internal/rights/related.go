package rights

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// ObjectLister is what RelatedLister wraps: engine.ObjectLister, whose
// method set it has, declared here so that the rights checks do not import
// the engine they check for.
type ObjectLister interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error)
	Namespaces(ctx context.Context, selector labels.Selector) ([]string, error)
}

// RelatedLister lists the related objects a customize hook asks for only
// where each of the controller's readers (ReadersOf) may list them: the
// server reads them with its own rights, and they go to the author's hook.
// A refusal is the list's error (a *ForbiddenError), never an empty list:
// a hook that derives its children from related objects would answer an
// empty world with no children, and the sync would delete them all. The
// sync fails before the hook is called, as Metacontroller's does when a
// related informer has not synced, and is retried with backoff.
type RelatedLister struct {
	ObjectLister
	Access Access
	// Subjects must all be allowed each list.
	Subjects []Subject
}

func (l *RelatedLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	if err := l.allowed(ctx, List(gvr, namespace)); err != nil {
		return nil, err
	}
	return l.ObjectLister.List(ctx, gvr, namespace, selector)
}

func (l *RelatedLister) Namespaces(ctx context.Context, selector labels.Selector) ([]string, error) {
	if err := l.allowed(ctx, List(definition.Namespaces, "")); err != nil {
		return nil, err
	}
	return l.ObjectLister.Namespaces(ctx, selector)
}

// allowed answers nil when every subject may do r; else the first refusal.
func (l *RelatedLister) allowed(ctx context.Context, r definition.Right) error {
	for _, s := range l.Subjects {
		if err := l.Access.Check(ctx, s, r); err != nil {
			return err
		}
	}
	return nil
}
