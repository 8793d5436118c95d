package compositecontroller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/registry/controllerregistry"
)

// Syncer runs one sync of a parent with a controller's hooks.
type Syncer interface {
	Run(ctx context.Context, cc *v1alpha1.CompositeController, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error)
}

// SyncREST is compositecontrollers/sync.
type SyncREST = controllerregistry.SyncREST

// NewSyncREST returns the /sync subresource of the store's
// CompositeControllers.
func NewSyncREST(store rest.Getter, scheme *runtime.Scheme, syncer Syncer) *SyncREST {
	return controllerregistry.NewSyncREST(store, scheme, func(ctx context.Context, stored runtime.Object, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error) {
		cc, err := controllerregistry.Versioned[v1alpha1.CompositeController](scheme, stored)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return syncer.Run(ctx, cc, req, dryRun)
	})
}
