package controllerregistry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Controller is what the strategies of both kinds of controller share:
// cluster-scoped, users own the spec and the server the status.
type Controller struct{}

func (Controller) NamespaceScoped() bool { return false }

// GetResetFields: status is not the user's.
func (Controller) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return SpecResetFields()
}

// Canonicalize has nothing to normalise: defaulting already did.
func (Controller) Canonicalize(obj runtime.Object) {}

func (Controller) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// AllowUnconditionalUpdate lets `kubectl replace` without a resourceVersion
// work as it does for built-in resources.
func (Controller) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// Status is what the status strategies of both kinds share; embedded
// beside the kind's strategy, its methods win over the strategy's.
type Status struct{}

// GetResetFields makes server-side apply through /status ignore everything
// but status.
func (Status) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return StatusResetFields()
}

// AllowUnconditionalUpdate is false: a status writer must say which
// version it read, so that two writers never silently overwrite each other.
func (Status) AllowUnconditionalUpdate(ctx context.Context) bool { return false }

// GetAttrs returns the labels and fields a list or watch of controllers
// may select on.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("not an object: %T", obj)
	}
	return labels.Set(m.GetLabels()), generic.ObjectMetaFieldsSet(&metav1.ObjectMeta{Name: m.GetName()}, false), nil
}

// Match is the filter of lists and watches of controllers.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
