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
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
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

// Strategy is what a kind's strategy is to its store: how objects are
// created, updated, deleted, and which fields are reset.
type Strategy interface {
	rest.RESTCreateUpdateStrategy
	rest.RESTDeleteStrategy
	rest.ResetFieldsStrategy
}

// NewStore returns the store of a cluster-scoped controller kind, served
// as resource (plural) and singular, with its strategy and columns; the
// caller completes it.
func NewStore(resource, singular string, newObj, newList func() runtime.Object, s Strategy, table rest.TableConvertor) *genericregistry.Store {
	return &genericregistry.Store{
		NewFunc:                   newObj,
		NewListFunc:               newList,
		PredicateFunc:             Match,
		DefaultQualifiedResource:  metacontroller.Resource(resource),
		SingularQualifiedResource: metacontroller.Resource(singular),

		CreateStrategy:      s,
		UpdateStrategy:      s,
		DeleteStrategy:      s,
		ResetFieldsStrategy: s,

		TableConvertor: table,
	}
}
