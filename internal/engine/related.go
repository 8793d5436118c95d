package engine

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// ObjectLister lists the objects related-resource rules select: from
// informers in the loop, from the cluster for /sync. A nil ObjectLister in
// Input means there is no cluster: rules produce a warning and no objects.
type ObjectLister interface {
	// List lists the objects of gvr in namespace ("" for all namespaces,
	// and for cluster-scoped resources) whose labels match selector.
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error)
	// Namespaces lists the names of the namespaces whose labels match
	// selector.
	Namespaces(ctx context.Context, selector labels.Selector) ([]string, error)
}

// ChildIndex finds a parent's candidate children without reading its whole
// namespace: the loop's informers index objects by controller.
type ChildIndex interface {
	// Candidates lists the objects of gvr in namespace ("" for all) that
	// owner controls or that have no controller.
	Candidates(ctx context.Context, gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error)
	// Get returns the object of gvr called namespace/name, or nil.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// RelatedQuery is what a customize hook's related-resource rule selects for
// one parent, read as Metacontroller reads it.
type RelatedQuery struct {
	GVR schema.GroupVersionResource
	// Namespaced tells whether the related resource is namespaced.
	Namespaced bool
	// Namespace is the one namespace to look in; "" means all namespaces
	// (and is the only choice for a cluster-scoped resource).
	Namespace string
	// NamespaceSelector, when set, selects the namespaces to look in.
	NamespaceSelector labels.Selector
	// Labels selects objects by label.
	Labels labels.Selector
	// Names, when not empty, selects objects by name.
	Names sets.Set[string]
}

// NewRelatedQuery reads rule for parent, as Metacontroller's customize
// manager does:
//   - names may not be combined with a label or namespace selector, nor a
//     namespace with a namespace selector;
//   - a namespace selector (v2 hooks, or cluster-scoped parents) selects
//     namespaced objects in the namespaces whose labels match;
//   - a label selector with a namespace looks in that namespace;
//   - a label selector alone looks in all namespaces, except for a v1 hook
//     of a namespaced parent, which sees its own namespace only;
//   - namespace and names alike, where a v1 hook of a namespaced parent
//     sees its own namespace only (v1 keys related objects by name alone,
//     so objects of other namespaces would collide);
//   - cluster-scoped related resources are seen by every parent.
func NewRelatedQuery(rule *hookapi.RelatedResourceRule, version v1alpha1.HookVersion, parent *unstructured.Unstructured, gvr schema.GroupVersionResource, namespaced bool) (RelatedQuery, error) {
	q := RelatedQuery{GVR: gvr, Namespaced: namespaced, Labels: labels.Everything()}
	hasNames := len(rule.Names) > 0
	if hasNames && (rule.LabelSelector != nil || rule.NamespaceSelector != nil) {
		return q, errors.New("names may not be combined with labelSelector or namespaceSelector")
	}
	if rule.Namespace != "" && rule.NamespaceSelector != nil {
		return q, errors.New("namespace may not be combined with namespaceSelector")
	}
	if rule.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(rule.LabelSelector)
		if err != nil {
			return q, fmt.Errorf("invalid labelSelector: %w", err)
		}
		q.Labels = sel
	}
	if hasNames {
		q.Names = sets.New(rule.Names...)
	}
	parentNS := parent.GetNamespace()
	v1Local := version != v1alpha1.HookVersionV2 && parentNS != "" && namespaced
	if rule.NamespaceSelector != nil {
		if v1Local {
			return q, errors.New("namespaceSelector needs a v2 hook when the parent is namespaced")
		}
		if !namespaced {
			return q, fmt.Errorf("namespaceSelector selects namespaced objects, and %s is cluster-scoped", gvr.GroupResource())
		}
		sel, err := metav1.LabelSelectorAsSelector(rule.NamespaceSelector)
		if err != nil {
			return q, fmt.Errorf("invalid namespaceSelector: %w", err)
		}
		q.NamespaceSelector = sel
		return q, nil
	}
	if !namespaced {
		return q, nil
	}
	if v1Local {
		if rule.Namespace != "" && rule.Namespace != parentNS {
			return q, fmt.Errorf("a v1 hook of a namespaced parent sees its own namespace only, and the rule names namespace %s", rule.Namespace)
		}
		q.Namespace = parentNS
		return q, nil
	}
	q.Namespace = rule.Namespace
	return q, nil
}

// Matches tells whether obj is one of the objects q selects;
// namespaceLabels gives the labels of a namespace when q has a namespace
// selector.
func (q RelatedQuery) Matches(obj *unstructured.Unstructured, namespaceLabels func(string) (labels.Set, bool)) bool {
	gk := schema.FromAPIVersionAndKind(obj.GetAPIVersion(), obj.GetKind()).GroupKind()
	if gk.Group != q.GVR.Group {
		return false
	}
	if q.Namespaced && q.Namespace != "" && obj.GetNamespace() != q.Namespace {
		return false
	}
	if q.NamespaceSelector != nil {
		nsLabels, ok := namespaceLabels(obj.GetNamespace())
		if !ok || !q.NamespaceSelector.Matches(nsLabels) {
			return false
		}
	}
	if q.Names != nil && !q.Names.Has(obj.GetName()) {
		return false
	}
	return q.Labels.Matches(labels.Set(obj.GetLabels()))
}

// List returns the objects q selects from lister.
func (q RelatedQuery) List(ctx context.Context, lister ObjectLister) ([]*unstructured.Unstructured, error) {
	namespaces := []string{q.Namespace}
	if q.NamespaceSelector != nil {
		var err error
		if namespaces, err = lister.Namespaces(ctx, q.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("can't list the namespaces of namespaceSelector %q: %w", q.NamespaceSelector, err)
		}
	}
	var out []*unstructured.Unstructured
	for _, ns := range namespaces {
		objs, err := lister.List(ctx, q.GVR, ns, q.Labels)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if q.Names == nil || q.Names.Has(obj.GetName()) {
				out = append(out, obj)
			}
		}
	}
	return out, nil
}
