package decoratorcontroller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// Storage is every REST endpoint of the decoratorcontrollers resource.
type Storage struct {
	DecoratorController *REST
	Status              *controllerregistry.StatusREST
	// Sync is nil when NewStorage was given no Syncer.
	Sync *controllerregistry.SyncREST
	// Preview is nil when NewStorage was given no Previewer.
	Preview *controllerregistry.PreviewREST
}

// REST is the decoratorcontrollers resource, stored in etcd.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames are those of Metacontroller's CRD: `kubectl get dec`.
func (r *REST) ShortNames() []string { return []string{"dec", "decorators"} }

// Categories puts DecoratorControllers in `kubectl get metacontroller`.
func (r *REST) Categories() []string { return []string{"metacontroller"} }

// Options are what the registry takes from the rest of the server, the
// same for both kinds of controller.
type Options = controllerregistry.Options

// kind is the DecoratorController to the registry code both kinds share.
func kind(scheme *runtime.Scheme) controllerregistry.Kind {
	return controllerregistry.Kind{
		Name: "DecoratorController", PreviewField: "decoratorController",
		Versioned: controllerregistry.VersionerOf[v1alpha1.DecoratorController](scheme),
		SpecChanged: func(obj, old runtime.Object) bool {
			return specChanged(obj.(*metacontroller.DecoratorController), old.(*metacontroller.DecoratorController))
		},
		Rollout: func(obj runtime.Object) *metacontroller.ControllerRollout {
			return obj.(*metacontroller.DecoratorController).Spec.Rollout
		},
		Parents: func(obj runtime.Object) []metacontroller.ResourceRule {
			resources := obj.(*metacontroller.DecoratorController).Spec.Resources
			rules := make([]metacontroller.ResourceRule, len(resources))
			for i, r := range resources {
				rules[i] = r.ResourceRule
			}
			return rules
		},
		Propose: func(stored runtime.Object, req *metacontroller.FleetPreview) (runtime.Object, bool) {
			proposed := stored.(*metacontroller.DecoratorController).DeepCopy()
			if req.Spec.DecoratorController == nil {
				return proposed, false
			}
			proposed.Spec = *req.Spec.DecoratorController.DeepCopy()
			return proposed, true
		},
		Warnings: func(proposed runtime.Object) []string {
			return validation.DecoratorWarnings(proposed.(*metacontroller.DecoratorController))
		},
	}
}

// NewStorage returns the REST storage of decoratorcontrollers and its
// subresources, all on one etcd store.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, opts Options) (*Storage, error) {
	k := kind(scheme)
	s := NewStrategy(scheme)
	s.destinations = opts.HookDestinations
	s.identityRequired = opts.Identity.Required && opts.Identity.Default == nil
	s.authors = controllerregistry.Authors{Self: opts.Self}
	if opts.Rights != nil {
		s.rightsWarnings = k.RightsWarnings(opts.Rights)
	}
	if opts.Authors != nil {
		s.mayAuthor = k.MayAuthor(opts.Authors)
	}
	if opts.ParentSchemas != nil {
		s.healthCost = k.HealthCost(opts.ParentSchemas, expressions)
	}
	store := controllerregistry.NewStore("decoratorcontrollers", "decoratorcontroller",
		func() runtime.Object { return &metacontroller.DecoratorController{} },
		func() runtime.Object { return &metacontroller.DecoratorControllerList{} },
		s, tableConvertor)
	subresources := k.Complete(store, scheme, s, opts)
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: controllerregistry.GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("can't complete the decoratorcontrollers store: %w", err)
	}
	return &Storage{
		DecoratorController: &REST{store},
		Status:              controllerregistry.NewStatusREST(store, statusStrategy{strategy: s}),
		Sync:                subresources.Sync,
		Preview:             subresources.Preview,
	}, nil
}
