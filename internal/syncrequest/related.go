package syncrequest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// callerLister lists children and related objects straight from the target
// cluster, and only what the caller may list: the server's own identity
// must not lend its rights.
type callerLister struct {
	cluster    *target.Cluster
	authorizer authorizer.Authorizer
	// keep says to keep what is listed, for find.
	keep bool

	mu     sync.Mutex
	listed []*unstructured.Unstructured
}

func (l *callerLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	if err := Authorize(ctx, l.authorizer, "list", gvr, namespace, ""); err != nil {
		return nil, err
	}
	list, err := l.cluster.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("can't list %s: %w", gvr.GroupResource(), err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		// As lean as the loop's cache keeps them, so that a hook gets the
		// same request from /sync as from the loop.
		fieldowner.Lean(&list.Items[i])
		out = append(out, &list.Items[i])
	}
	if l.keep {
		l.mu.Lock()
		l.listed = append(l.listed, out...)
		l.mu.Unlock()
	}
	return out, nil
}

// find returns the listed object of desired's apiVersion, kind, namespace
// and name, or nil. A linear search: it is only needed for the few desired
// children the plan has no observed object for.
func (l *callerLister) find(desired *unstructured.Unstructured) *unstructured.Unstructured {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, obj := range l.listed {
		if obj.GetName() == desired.GetName() && obj.GetNamespace() == desired.GetNamespace() &&
			obj.GetKind() == desired.GetKind() && obj.GetAPIVersion() == desired.GetAPIVersion() {
			return obj
		}
	}
	return nil
}

func (l *callerLister) Namespaces(ctx context.Context, selector labels.Selector) ([]string, error) {
	objs, err := l.List(ctx, definition.Namespaces, "", selector)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	return names, nil
}

// authorize refuses to read or write, on the caller's behalf, what the
// caller could not themselves.
func Authorize(ctx context.Context, authz authorizer.Authorizer, verb string, gvr schema.GroupVersionResource, namespace, name string) error {
	return authorizeSubresource(ctx, authz, verb, gvr, "", namespace, name)
}

func authorizeSubresource(ctx context.Context, authz authorizer.Authorizer, verb string, gvr schema.GroupVersionResource, subresource, namespace, name string) error {
	if authz == nil {
		return nil
	}
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(gvr.GroupResource(), name, errors.New("no user in the request"))
	}
	decision, reason, err := authz.Authorize(ctx, authorizer.AttributesRecord{
		User: user, Verb: verb, Namespace: namespace, Name: name, ResourceRequest: true,
		APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource, Subresource: subresource,
	})
	if err != nil && decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(gvr.GroupResource(), name, fmt.Errorf("a sync reads it on your behalf: %w", err))
	}
	if decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(gvr.GroupResource(), name, fmt.Errorf("a sync reads it on your behalf, and you may not %s it: %s", verb, reason))
	}
	return nil
}
