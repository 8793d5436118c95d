package compositecontroller

import (
	"context"
	"fmt"

	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/registry/controllerregistry"
)

// Storage is every REST endpoint of the compositecontrollers resource.
type Storage struct {
	CompositeController *REST
	Status              *StatusREST
	// Sync is nil when NewStorage was given no Syncer.
	Sync *SyncREST
	// Preview is nil when NewStorage was given no Previewer.
	Preview *PreviewREST
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

// NewStorage returns the REST storage of compositecontrollers and its
// subresources, all on one etcd store.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, opts Options) (*Storage, error) {
	s := NewStrategy(scheme)
	s.destinations = opts.HookDestinations
	s.identityRequired = opts.Identity.Required && opts.Identity.Default == nil
	s.authors = controllerregistry.Authors{Self: opts.Self}
	if opts.Rights != nil {
		s.rightsWarnings = controllerregistry.RightsWarnings(scheme, opts.Rights.MissingRights)
	}
	if opts.Authors != nil {
		s.mayAuthor = controllerregistry.MayAuthor(scheme, opts.Authors.CheckAuthor)
	}
	store := controllerregistry.NewStore("compositecontrollers", "compositecontroller",
		func() runtime.Object { return &metacontroller.CompositeController{} },
		func() runtime.Object { return &metacontroller.CompositeControllerList{} },
		s, tableConvertor)
	if opts.Authors != nil {
		store.BeginCreate = controllerregistry.CheckAuthorOnCreate(scheme, opts.Authors.CheckAuthor)
		store.BeginUpdate = controllerregistry.CheckAuthorOnSpecUpdate(scheme, opts.Authors.CheckAuthor, specChanged)
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: controllerregistry.GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("can't complete the compositecontrollers store: %w", err)
	}

	storage := &Storage{
		CompositeController: &REST{store},
		Status:              controllerregistry.NewStatusREST(store, NewStatusStrategy(s)),
	}
	if opts.Syncer != nil {
		storage.Sync = NewSyncREST(store, scheme, opts.Syncer)
	}
	if opts.Previewer != nil {
		storage.Preview = NewPreviewREST(store, scheme, s, opts.Previewer)
	}
	return storage, nil
}

// Options are what the registry takes from the rest of the server; each
// may be nil (standalone mode has no target cluster).
type Options struct {
	// Syncer runs /sync.
	Syncer Syncer
	// Previewer runs /preview.
	Previewer Previewer
	// Rights warns on apply about rights the server lacks.
	Rights RightsChecker
	// Authors refuses a controller whose author may not do what its loop
	// would do.
	Authors AuthorChecker
	// HookDestinations are the address ranges hook URLs may not name.
	HookDestinations hooks.Destinations
	// Identity is the operator's policy on controller identities.
	Identity rights.IdentityPolicy
	// Self is who the server is in the target cluster, which never
	// becomes a controller's author; nil without a target cluster.
	Self func(ctx context.Context) (string, error)
}

// AuthorChecker refuses, with a Forbidden error, a CompositeController
// whose loop would do what the requesting user may not.
type AuthorChecker interface {
	CheckAuthor(ctx context.Context, cc *v1alpha1.CompositeController) error
}

// specChanged tells whether an update changes the spec.
func specChanged(obj, old runtime.Object) bool {
	return !apiequality.Semantic.DeepEqual(obj.(*metacontroller.CompositeController).Spec, old.(*metacontroller.CompositeController).Spec)
}

// RightsChecker tells which rights a controller needs that the server lacks
// in the target cluster, in one sentence with the fix; "" when none.
type RightsChecker interface {
	MissingRights(ctx context.Context, cc *v1alpha1.CompositeController) (string, error)
}

// StatusREST is the compositecontrollers/status subresource.
type StatusREST = controllerregistry.StatusREST
