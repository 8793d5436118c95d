package rights

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
)

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// RelatedLister lists the related objects a customize hook asks for only
// where the controller's subject may list them: the server reads them with
// its own rights, and they go to the author's hook. A refused rule gives no
// objects, not an error, so that the sync goes on without them (and the
// worker is never held); Denied says what was refused.
type RelatedLister struct {
	engine.ObjectLister
	Access  Access
	Subject Subject

	mu     sync.Mutex
	denied []error
}

func (l *RelatedLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	if ok, err := l.allowed(ctx, List(gvr, namespace)); !ok {
		return nil, err
	}
	return l.ObjectLister.List(ctx, gvr, namespace, selector)
}

func (l *RelatedLister) Namespaces(ctx context.Context, selector labels.Selector) ([]string, error) {
	if ok, err := l.allowed(ctx, List(namespaces, "")); !ok {
		return nil, err
	}
	return l.ObjectLister.Namespaces(ctx, selector)
}

// allowed tells whether the subject may do r; a refusal is recorded and is
// no error.
func (l *RelatedLister) allowed(ctx context.Context, r Right) (bool, error) {
	err := l.Access.Check(ctx, l.Subject, r)
	var forbidden *ForbiddenError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &forbidden):
		l.mu.Lock()
		l.denied = append(l.denied, err)
		l.mu.Unlock()
		return false, nil
	default:
		return false, err
	}
}

// Denied are the refusals of the lists so far, each once.
func (l *RelatedLister) Denied() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []error
	seen := map[string]bool{}
	for _, err := range l.denied {
		if !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	return out
}
