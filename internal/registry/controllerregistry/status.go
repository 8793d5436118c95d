package controllerregistry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// SpecResetFields tells server-side apply that status is not the user's:
// fields a user applies under status through the main resource are
// dropped, and nobody's ownership of them is recorded.
func SpecResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"metacontroller.k8s.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// StatusResetFields makes server-side apply through /status ignore
// everything but status.
func StatusResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"metacontroller.k8s.io/v1alpha1": fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata"),
		),
	}
}

// KeepMetadata keeps, in an update through /status, the metadata a user
// owns as stored.
func KeepMetadata(updated, stored *metav1.ObjectMeta) {
	updated.Labels = stored.Labels
	updated.Annotations = stored.Annotations
	updated.Finalizers = stored.Finalizers
	updated.OwnerReferences = stored.OwnerReferences
	updated.Generation = stored.Generation
}

// StatusUpdateStrategy is a kind's strategy for its status subresource.
type StatusUpdateStrategy interface {
	rest.RESTUpdateStrategy
	rest.ResetFieldsStrategy
}

// NewStatusREST makes the status subresource of store: a copy of the store
// with another update strategy, sharing its etcd storage and watch cache.
// The status is the server's to write: the author checks of the spec
// (BeginCreate, BeginUpdate) are not run.
func NewStatusREST(store *genericregistry.Store, strategy StatusUpdateStrategy) *StatusREST {
	statusStore := *store
	statusStore.CreateStrategy = nil
	statusStore.DeleteStrategy = nil
	statusStore.UpdateStrategy = strategy
	statusStore.ResetFieldsStrategy = strategy
	statusStore.BeginCreate, statusStore.BeginUpdate = nil, nil
	return &StatusREST{store: &statusStore}
}

// StatusREST is the status subresource of a controller kind.
type StatusREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
	_ rest.TableConvertor      = &StatusREST{}
)

// New returns an empty object of the kind.
func (r *StatusREST) New() runtime.Object { return r.store.New() }

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
