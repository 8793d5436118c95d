package reconcile

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// RevisionLister lists the ControllerRevisions of a parent resource in a
// namespace: those with Metacontroller's apiGroup and resource labels.
type RevisionLister interface {
	Revisions(ctx context.Context, namespace string, parents schema.GroupVersionResource) ([]*v1alpha1.ControllerRevision, error)
}

// ClientRevisions lists revisions from the API, not from a cache: a rollout
// decides from the revisions it wrote on the previous sync, which a watch
// may not have delivered yet. Only controllers with a rolling update
// strategy ask, once per sync of a parent.
type ClientRevisions struct {
	Client dynamic.Interface
}

// Revisions implements RevisionLister.
func (r ClientRevisions) Revisions(ctx context.Context, namespace string, parents schema.GroupVersionResource) ([]*v1alpha1.ControllerRevision, error) {
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: map[string]string{
		engine.RevisionLabelAPIGroup: parents.Group,
		engine.RevisionLabelResource: parents.Resource,
	}})
	list, err := r.Client.Resource(definition.ControllerRevisions).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("can't list ControllerRevisions: %w", err)
	}
	out := make([]*v1alpha1.ControllerRevision, 0, len(list.Items))
	for i := range list.Items {
		rev := &v1alpha1.ControllerRevision{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, rev); err != nil {
			return nil, fmt.Errorf("can't read ControllerRevision %s: %w", list.Items[i].GetName(), err)
		}
		out = append(out, rev)
	}
	return out, nil
}
