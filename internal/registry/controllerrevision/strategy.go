// Package controllerrevision is the registry of ControllerRevisions: the
// revisions of parents that the loop keeps during rolling updates, served
// in metacontroller.k8s.io/v1alpha1 as Metacontroller's CRD serves them, so
// that tools and manifests that read them keep working.
package controllerrevision

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
)

// REST is the controllerrevisions resource, stored in etcd.
type REST struct {
	*genericregistry.Store
}

// NewREST returns the REST storage of controllerrevisions.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	s := strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &metacontroller.ControllerRevision{} },
		NewListFunc:               func() runtime.Object { return &metacontroller.ControllerRevisionList{} },
		DefaultQualifiedResource:  metacontroller.Resource("controllerrevisions"),
		SingularQualifiedResource: metacontroller.Resource("controllerrevision"),

		CreateStrategy: s,
		UpdateStrategy: s,
		DeleteStrategy: s,

		TableConvertor: rest.NewDefaultTableConvertor(metacontroller.Resource("controllerrevisions")),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, fmt.Errorf("can't complete the controllerrevisions store: %w", err)
	}
	return &REST{store}, nil
}

// strategy: a ControllerRevision is plain data written by the loop; what it
// checks is that the loop can read back what it wrote.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func (strategy) NamespaceScoped() bool                                    { return true }
func (strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}
func (strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
}
func (strategy) Canonicalize(obj runtime.Object)                           {}
func (strategy) AllowCreateOnUpdate(ctx context.Context) bool              { return false }
func (strategy) AllowUnconditionalUpdate(ctx context.Context) bool         { return true }
func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateControllerRevision(obj.(*metacontroller.ControllerRevision))
}

func (strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateControllerRevisionUpdate(obj.(*metacontroller.ControllerRevision), old.(*metacontroller.ControllerRevision))
}
