package compositecontroller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// laggingCache answers reads from the watch cache (resourceVersion "0")
// with NotFound, as a watch cache that has not seen a create yet does, and
// quorum reads with the object.
type laggingCache struct {
	obj         runtime.Object
	quorumReads int
}

func (c *laggingCache) Get(_ context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	if opts.ResourceVersion == "0" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: metacontroller.GroupName, Resource: "compositecontrollers"}, name)
	}
	c.quorumReads++
	return c.obj, nil
}

type syncedController struct{ name string }

func (s *syncedController) Run(_ context.Context, controller runtime.Object, _ *v1alpha1.SyncRequest, _ bool) (*v1alpha1.SyncRequestStatus, error) {
	s.name = controller.(*v1alpha1.CompositeController).Name
	return &v1alpha1.SyncRequestStatus{}, nil
}

// TestSyncOfAControllerJustCreatedFindsIt: a controller previewed the
// moment it was created is read from etcd when the watch cache has not
// seen it yet, not answered 404.
func TestSyncOfAControllerJustCreatedFindsIt(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	cache := &laggingCache{obj: validCompositeController("just-created")}
	syncer := &syncedController{}
	req := &metacontroller.SyncRequest{Spec: metacontroller.SyncRequestSpec{ParentRef: &metacontroller.ParentReference{Namespace: "ns", Name: "p"}}}
	_, err := controllerregistry.NewSyncREST(cache, scheme, kind(scheme), syncer).Create(context.Background(), "just-created", req, nil, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("/sync of a controller the watch cache has not seen yet: %v", err)
	}
	if syncer.name != "just-created" || cache.quorumReads != 1 {
		t.Errorf("synced %q after %d quorum reads; want the controller, read once from etcd", syncer.name, cache.quorumReads)
	}
}
