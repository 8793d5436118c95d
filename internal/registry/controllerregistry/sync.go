package controllerregistry

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/dryrun"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
)

// SyncREST is the /sync subresource of a controller kind: POST a SyncRequest naming a parent,
// get it back with the hook's answer and the plan in its status. Like
// TokenRequest, nothing of the request is stored.
type SyncREST struct {
	store  rest.Getter
	scheme *runtime.Scheme
	kind   Kind
	syncer Syncer
}

var (
	_ rest.NamedCreater             = &SyncREST{}
	_ rest.GroupVersionKindProvider = &SyncREST{}
)

// NewSyncREST returns the /sync subresource of the store's controllers, of
// kind.
func NewSyncREST(store rest.Getter, scheme *runtime.Scheme, kind Kind, syncer Syncer) *SyncREST {
	return &SyncREST{store: store, scheme: scheme, kind: kind, syncer: syncer}
}

// New returns an empty SyncRequest.
func (r *SyncREST) New() runtime.Object { return &metacontroller.SyncRequest{} }

// Destroy has nothing to release: the store is the main resource's.
func (r *SyncREST) Destroy() {}

// GroupVersionKind says the subresource speaks SyncRequest, not the
// controller's kind.
func (r *SyncREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return v1alpha1.SchemeGroupVersion.WithKind("SyncRequest")
}

// Create runs the sync. A Connecter could not take dryRun; a NamedCreater
// gets it in options, validated by the generic endpoint.
func (r *SyncREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*metacontroller.SyncRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SyncRequest: %T", obj))
	}
	if errs := validation.ValidateSyncRequest(name, req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(metacontroller.Kind("SyncRequest"), name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	stored, err := GetController(ctx, r.store, name)
	if err != nil {
		return nil, err
	}
	versioned := &v1alpha1.SyncRequest{}
	if err := r.scheme.Convert(req, versioned, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	controller, err := r.kind.Versioned(stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	status, err := r.syncer.Run(ctx, controller, versioned, dryrun.IsDryRun(options.DryRun))
	if err != nil {
		return nil, err
	}
	versioned.Status = *status
	// The generic create handler tracks the fields of every object it
	// is given, but nothing of a SyncRequest is stored: an answer that
	// listed its sender as the manager of its fields would say something
	// untrue (and cost its encoding).
	versioned.ManagedFields = nil
	out := &metacontroller.SyncRequest{}
	if err := r.scheme.Convert(versioned, out, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out.Name = name
	return out, nil
}

// GetController reads the controller a subresource request names, from the
// watch cache: a sync runs the controller as it is known now, and an etcd
// quorum read per preview would cost more than the preview itself. A
// controller the cache has not seen yet (created a moment ago, and
// previewed at once) is read from etcd: a miss must not answer 404 for what
// the caller has just created.
func GetController(ctx context.Context, store rest.Getter, name string) (runtime.Object, error) {
	stored, err := store.Get(ctx, name, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		stored, err = store.Get(ctx, name, &metav1.GetOptions{})
	}
	return stored, err
}
