package controllerregistry

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// Kind is one kind of controller as the registry code every kind shares
// sees it: how its objects convert to the v1alpha1 form the rest of the
// server reads (definition.Compile takes either kind), and what a fleet
// preview's proposal changes. A kind's registry keeps its strategy and
// table, and declares itself with one Kind.
type Kind struct {
	// Name is the controller's kind; PreviewField the FleetPreview spec
	// field that proposes its spec.
	Name, PreviewField string
	// Versioned converts an internal object of the kind into its v1alpha1
	// form (VersionerOf).
	Versioned Versioner
	// SpecChanged tells whether an update changes the spec.
	SpecChanged func(obj, old runtime.Object) bool
	// Rollout is the spec.rollout of an internal object of the kind, as
	// stored in it (nil for none).
	Rollout func(obj runtime.Object) *metacontroller.ControllerRollout
	// Parents are the resources an internal object of the kind runs over,
	// whose objects its health condition is evaluated over.
	Parents func(obj runtime.Object) []metacontroller.ResourceRule
	// Propose returns a copy of stored with the request's proposed spec,
	// and whether the request proposed one.
	Propose func(stored runtime.Object, req *metacontroller.FleetPreview) (runtime.Object, bool)
	// Warnings are a proposed controller's validation warnings.
	Warnings func(proposed runtime.Object) []string
}

// Versioner converts an internal object into its v1alpha1 form.
type Versioner func(internal runtime.Object) (runtime.Object, error)

// VersionerOf converts into V, the v1alpha1 type of a kind, as the
// generated conversions do.
func VersionerOf[V any, PV interface {
	*V
	runtime.Object
}](scheme *runtime.Scheme) Versioner {
	return func(internal runtime.Object) (runtime.Object, error) {
		out := PV(new(V))
		if err := scheme.Convert(internal, out, nil); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Options are what a kind's registry takes from the rest of the server,
// the same for every kind; each may be nil (standalone mode has no target
// cluster). Each interface takes a controller of any kind in its v1alpha1
// form.
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
	// ParentSchemas finds the parent resources' schemas, against which
	// a rollout's health condition is typed and its cost estimated; nil
	// without a target cluster, where no condition is evaluated.
	ParentSchemas *ParentSchemas
}

// Syncer runs one sync of a parent with a controller's hooks
// (syncrequest.Runner).
type Syncer interface {
	Run(ctx context.Context, controller runtime.Object, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error)
}

// Previewer previews a controller against its live parents
// (fleetpreview.Previewer).
type Previewer interface {
	// Preview previews controller, the stored one or (proposed) the stored
	// one with the caller's spec, one page of parents at a time.
	Preview(ctx context.Context, controller runtime.Object, proposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error)
}

// RightsChecker tells which rights a controller needs that the server
// lacks in the target cluster, in one sentence with the fix; "" when none
// (rights.Checker).
type RightsChecker interface {
	MissingRights(ctx context.Context, controller runtime.Object) (string, error)
}

// AuthorChecker refuses, with a Forbidden error, a controller whose loop
// would do what the requesting user may not (rights.Escalation).
type AuthorChecker interface {
	CheckAuthor(ctx context.Context, controller runtime.Object) error
}

// Subresources are the subresources of a kind besides status; each nil
// when Options gave no way to serve it.
type Subresources struct {
	Sync    *SyncREST
	Preview *PreviewREST
}

// Complete gives store (its strategy, whose updates also validate a
// preview's proposal) the author checks of opts, and returns the /sync and
// /preview subresources opts can serve.
func (k Kind) Complete(store *genericregistry.Store, scheme *runtime.Scheme, strategy Strategy, opts Options) Subresources {
	if opts.Authors != nil {
		store.BeginCreate = k.checkAuthorOnCreate(opts.Authors)
		store.BeginUpdate = k.checkAuthorOnSpecUpdate(opts.Authors)
	}
	var out Subresources
	if opts.Syncer != nil {
		out.Sync = NewSyncREST(store, scheme, k, opts.Syncer)
	}
	if opts.Previewer != nil {
		out.Preview = NewPreviewREST(store, scheme, strategy, k, opts.Previewer)
	}
	return out
}
