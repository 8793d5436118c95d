package compositecontroller

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// Storage is every REST endpoint of the compositecontrollers resource.
type Storage struct {
	CompositeController *REST
	Status              *controllerregistry.StatusREST
	// Sync is nil when NewStorage was given no Syncer.
	Sync *controllerregistry.SyncREST
	// Preview is nil when NewStorage was given no Previewer.
	Preview *controllerregistry.PreviewREST
}

// REST is the compositecontrollers resource, stored in etcd.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames lets `kubectl get cc` work, as it does with Metacontroller's CRD.
func (r *REST) ShortNames() []string { return []string{"cc", "cctl"} }

// Categories puts CompositeControllers in `kubectl get metacontroller`.
func (r *REST) Categories() []string { return []string{"metacontroller"} }

// Options are what the registry takes from the rest of the server, the
// same for both kinds of controller.
type Options = controllerregistry.Options

// kind is the CompositeController to the registry code both kinds share.
func kind(scheme *runtime.Scheme) controllerregistry.Kind {
	return controllerregistry.Kind{
		Name: "CompositeController", PreviewField: "compositeController",
		Versioned: controllerregistry.VersionerOf[v1alpha1.CompositeController](scheme),
		SpecChanged: func(obj, old runtime.Object) bool {
			return !apiequality.Semantic.DeepEqual(obj.(*metacontroller.CompositeController).Spec, old.(*metacontroller.CompositeController).Spec)
		},
		Rollout: func(obj runtime.Object) *metacontroller.ControllerRollout {
			return obj.(*metacontroller.CompositeController).Spec.Rollout
		},
		Parents: func(obj runtime.Object) []metacontroller.ResourceRule {
			return []metacontroller.ResourceRule{obj.(*metacontroller.CompositeController).Spec.ParentResource.ResourceRule}
		},
		Propose: func(stored runtime.Object, req *metacontroller.FleetPreview) (runtime.Object, bool) {
			proposed := stored.(*metacontroller.CompositeController).DeepCopy()
			if req.Spec.CompositeController == nil {
				return proposed, false
			}
			proposed.Spec = *req.Spec.CompositeController.DeepCopy()
			return proposed, true
		},
		Warnings: func(proposed runtime.Object) []string {
			return validation.Warnings(proposed.(*metacontroller.CompositeController), expressions)
		},
	}
}

// NewStorage returns the REST storage of compositecontrollers and its
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
	store := controllerregistry.NewStore("compositecontrollers", "compositecontroller",
		func() runtime.Object { return &metacontroller.CompositeController{} },
		func() runtime.Object { return &metacontroller.CompositeControllerList{} },
		s, tableConvertor)
	subresources := k.Complete(store, scheme, s, opts)
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: controllerregistry.GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("can't complete the compositecontrollers store: %w", err)
	}
	return &Storage{
		CompositeController: &REST{store},
		Status:              controllerregistry.NewStatusREST(store, NewStatusStrategy(s)),
		Sync:                subresources.Sync,
		Preview:             subresources.Preview,
	}, nil
}
