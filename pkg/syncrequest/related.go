package syncrequest

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// relatedLister reads the objects a customize hook asks for, straight from
// the target cluster, as the caller may.
type relatedLister struct {
	target *Target
}

func (l *relatedLister) Related(ctx context.Context, parent *unstructured.Unstructured, rule *hookapi.RelatedResourceRule) ([]*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("customize hook returned a related resource with apiVersion %q: %w", rule.APIVersion, err)
	}
	gvr := gv.WithResource(rule.Resource)
	namespace := rule.Namespace
	if namespace == "" {
		namespace = parent.GetNamespace()
	}
	opts := metav1.ListOptions{}
	if rule.LabelSelector != nil {
		selector, err := metav1.LabelSelectorAsSelector(rule.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("customize hook returned an invalid labelSelector for %s: %w", rule.Resource, err)
		}
		opts.LabelSelector = selector.String()
	}
	if err := l.target.authorize(ctx, "list", gvr, namespace, ""); err != nil {
		return nil, err
	}
	list, err := l.target.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("can't list related %s: %w", gvr.Resource, err)
	}
	names := map[string]bool{}
	for _, n := range rule.Names {
		names[n] = true
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		if len(names) == 0 || names[list.Items[i].GetName()] {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
