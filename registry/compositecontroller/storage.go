package compositecontroller

import (
	"context"
	"fmt"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
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
	if opts.Rights != nil {
		s.rightsWarnings = rightsWarnings(scheme, opts.Rights)
	}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &metacontroller.CompositeController{} },
		NewListFunc:               func() runtime.Object { return &metacontroller.CompositeControllerList{} },
		PredicateFunc:             MatchCompositeController,
		DefaultQualifiedResource:  metacontroller.Resource("compositecontrollers"),
		SingularQualifiedResource: metacontroller.Resource("compositecontroller"),

		CreateStrategy:      s,
		UpdateStrategy:      s,
		DeleteStrategy:      s,
		ResetFieldsStrategy: s,

		TableConvertor: tableConvertor{},
	}
	if opts.Authors != nil {
		store.BeginCreate = checkAuthorOnCreate(scheme, opts.Authors)
		store.BeginUpdate = checkAuthorOnUpdate(scheme, opts.Authors)
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("can't complete the compositecontrollers store: %w", err)
	}

	// The status endpoint is a copy of the store with another update
	// strategy: it shares the etcd storage and the watch cache.
	statusStore := *store
	statusStrategy := NewStatusStrategy(s)
	statusStore.CreateStrategy = nil
	statusStore.DeleteStrategy = nil
	statusStore.UpdateStrategy = statusStrategy
	statusStore.ResetFieldsStrategy = statusStrategy
	// The status is the server's to write; its author checks are the
	// spec's.
	statusStore.BeginCreate, statusStore.BeginUpdate = nil, nil

	storage := &Storage{
		CompositeController: &REST{store},
		Status:              &StatusREST{store: &statusStore},
	}
	if opts.Syncer != nil {
		storage.Sync = NewSyncREST(store, scheme, opts.Syncer)
	}
	if opts.Previewer != nil {
		storage.Preview = &PreviewREST{store: store, scheme: scheme, strategy: s, previewer: opts.Previewer}
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
}

// AuthorChecker refuses, with a Forbidden error, a CompositeController
// whose loop would do what the requesting user may not.
type AuthorChecker interface {
	CheckAuthor(ctx context.Context, cc *v1alpha1.CompositeController) error
}

func checkAuthorOnCreate(scheme *runtime.Scheme, authors AuthorChecker) genericregistry.BeginCreateFunc {
	return func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		if err := checkAuthor(ctx, scheme, authors, obj.(*metacontroller.CompositeController)); err != nil {
			return nil, err
		}
		return func(context.Context, bool) {}, nil
	}
}

// checkAuthorOnUpdate checks only a change of spec: metadata-only updates
// (labels, finalizers) give the loop nothing new to do.
func checkAuthorOnUpdate(scheme *runtime.Scheme, authors AuthorChecker) genericregistry.BeginUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		newCC, oldCC := obj.(*metacontroller.CompositeController), old.(*metacontroller.CompositeController)
		if !apiequality.Semantic.DeepEqual(newCC.Spec, oldCC.Spec) {
			if err := checkAuthor(ctx, scheme, authors, newCC); err != nil {
				return nil, err
			}
		}
		return func(context.Context, bool) {}, nil
	}
}

func checkAuthor(ctx context.Context, scheme *runtime.Scheme, authors AuthorChecker, cc *metacontroller.CompositeController) error {
	versioned := &v1alpha1.CompositeController{}
	if err := scheme.Convert(cc, versioned, nil); err != nil {
		return apierrors.NewInternalError(err)
	}
	return authors.CheckAuthor(ctx, versioned)
}

// RightsChecker tells which rights a controller needs that the server lacks
// in the target cluster, in one sentence with the fix; "" when none.
type RightsChecker interface {
	MissingRights(ctx context.Context, cc *v1alpha1.CompositeController) (string, error)
}

// rightsCheckTimeout bounds the access reviews of one apply: a slow target
// cluster must not hold the user's request, only lose its warning.
const rightsCheckTimeout = 3 * time.Second

func rightsWarnings(scheme *runtime.Scheme, rights RightsChecker) func(context.Context, *metacontroller.CompositeController) []string {
	return func(ctx context.Context, cc *metacontroller.CompositeController) []string {
		versioned := &v1alpha1.CompositeController{}
		if err := scheme.Convert(cc, versioned, nil); err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, rightsCheckTimeout)
		defer cancel()
		msg, err := rights.MissingRights(ctx, versioned)
		switch {
		case err != nil:
			return []string{fmt.Sprintf("can't check this server's rights for the controller: %v", err)}
		case msg != "":
			return []string{msg}
		}
		return nil
	}
}

// StatusREST is the compositecontrollers/status subresource.
type StatusREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
	_ rest.TableConvertor      = &StatusREST{}
)

// New returns an empty CompositeController.
func (r *StatusREST) New() runtime.Object { return &metacontroller.CompositeController{} }

// Destroy does nothing: the store is shared with the main resource, which
// destroys it.
func (r *StatusREST) Destroy() {}

// Get returns the object, so that the status can be patched.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update changes the status of an object, and nothing else.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// A subresource never creates its object.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints the object as the main resource does.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}
