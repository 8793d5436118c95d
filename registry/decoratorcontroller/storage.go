package decoratorcontroller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/registry/controllerregistry"
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

// Options are what the registry takes from the rest of the server; each
// may be nil (standalone mode has no target cluster).
type Options struct {
	// Syncer runs /sync.
	Syncer interface {
		RunDecorator(ctx context.Context, dc *v1alpha1.DecoratorController, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error)
	}
	// Rights warns on apply about rights the server lacks.
	Rights interface {
		MissingDecoratorRights(ctx context.Context, dc *v1alpha1.DecoratorController) (string, error)
	}
	// Authors refuses a controller whose author may not do what its loop
	// would do.
	Authors interface {
		CheckDecoratorAuthor(ctx context.Context, dc *v1alpha1.DecoratorController) error
	}
	// Previewer runs /preview.
	Previewer interface {
		PreviewDecorator(ctx context.Context, dc *v1alpha1.DecoratorController, proposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error)
	}
	// HookDestinations are the address ranges hook URLs may not name.
	HookDestinations hooks.Destinations
	// Identity is the operator's policy on controller identities.
	Identity rights.IdentityPolicy
	// Self is who the server is in the target cluster, which never
	// becomes a controller's author; nil without a target cluster.
	Self func(ctx context.Context) (string, error)
}

// NewStorage returns the REST storage of decoratorcontrollers and its
// status, on one etcd store.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, opts Options) (*Storage, error) {
	s := NewStrategy(scheme)
	s.destinations = opts.HookDestinations
	s.identityRequired = opts.Identity.Required && opts.Identity.Default == nil
	s.authors = controllerregistry.Authors{Self: opts.Self}
	if opts.Rights != nil {
		s.rightsWarnings = controllerregistry.RightsWarnings(scheme, opts.Rights.MissingDecoratorRights)
	}
	if opts.Authors != nil {
		s.mayAuthor = controllerregistry.MayAuthor(scheme, opts.Authors.CheckDecoratorAuthor)
	}
	store := controllerregistry.NewStore("decoratorcontrollers", "decoratorcontroller",
		func() runtime.Object { return &metacontroller.DecoratorController{} },
		func() runtime.Object { return &metacontroller.DecoratorControllerList{} },
		s, tableConvertor)
	if opts.Authors != nil {
		store.BeginCreate = controllerregistry.CheckAuthorOnCreate(scheme, opts.Authors.CheckDecoratorAuthor)
		store.BeginUpdate = controllerregistry.CheckAuthorOnSpecUpdate(scheme, opts.Authors.CheckDecoratorAuthor, func(obj, old runtime.Object) bool {
			return specChanged(obj.(*metacontroller.DecoratorController), old.(*metacontroller.DecoratorController))
		})
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: controllerregistry.GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("can't complete the decoratorcontrollers store: %w", err)
	}
	storage := &Storage{
		DecoratorController: &REST{store},
		Status:              controllerregistry.NewStatusREST(store, statusStrategy{strategy: s}),
	}
	if opts.Syncer != nil {
		storage.Sync = controllerregistry.NewSyncREST(store, scheme, func(ctx context.Context, stored runtime.Object, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error) {
			dc, err := controllerregistry.Versioned[v1alpha1.DecoratorController](scheme, stored)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return opts.Syncer.RunDecorator(ctx, dc, req, dryRun)
		})
	}
	if opts.Previewer != nil {
		storage.Preview = controllerregistry.NewPreviewREST(store, scheme, s, controllerregistry.Proposal{
			Kind: "DecoratorController", Field: "decoratorController",
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
			Preview: func(ctx context.Context, proposed runtime.Object, isProposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error) {
				dc, err := controllerregistry.Versioned[v1alpha1.DecoratorController](scheme, proposed)
				if err != nil {
					return nil, apierrors.NewInternalError(err)
				}
				return opts.Previewer.PreviewDecorator(ctx, dc, isProposed, spec)
			},
		})
	}
	return storage, nil
}
