package compositecontroller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/registry/controllerregistry"
)

// Previewer previews a controller against its live parents.
type Previewer interface {
	// Preview previews cc, the stored controller or (proposed) the stored
	// one with the caller's spec, one page of parents at a time.
	Preview(ctx context.Context, cc *v1alpha1.CompositeController, proposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error)
}

// PreviewREST is compositecontrollers/preview (controllerregistry.PreviewREST).
type PreviewREST = controllerregistry.PreviewREST

// NewPreviewREST returns the preview subresource of the store's
// CompositeControllers, validated by strategy as updates are.
func NewPreviewREST(store rest.Getter, scheme *runtime.Scheme, strategy rest.RESTUpdateStrategy, previewer Previewer) *PreviewREST {
	return controllerregistry.NewPreviewREST(store, scheme, strategy, controllerregistry.Proposal{
		Kind: "CompositeController", Field: "compositeController",
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
		Preview: func(ctx context.Context, proposed runtime.Object, isProposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error) {
			cc := &v1alpha1.CompositeController{}
			if err := scheme.Convert(proposed, cc, nil); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return previewer.Preview(ctx, cc, isProposed, spec)
		},
	})
}
