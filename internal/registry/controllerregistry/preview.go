package controllerregistry

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
)

// PreviewREST is <controllers>/{name}/preview: POST a FleetPreview with a
// proposed spec of the controller, get it back with what that spec would
// do to each live parent. As a SubjectAccessReview, it is a question:
// nothing of it is stored, and nothing is written anywhere. The proposed
// spec is checked as an update of the controller would be — validated
// here by the kind's strategy, its author's rights by the previewer — for
// a preview calls the caller's hooks with live parents.
type PreviewREST struct {
	store     rest.Getter
	scheme    *runtime.Scheme
	strategy  rest.RESTUpdateStrategy
	kind      Kind
	previewer Previewer
}

var (
	_ rest.NamedCreater             = &PreviewREST{}
	_ rest.GroupVersionKindProvider = &PreviewREST{}
)

// NewPreviewREST returns the preview subresource of the store's
// controllers, of kind, whose updates strategy validates.
func NewPreviewREST(store rest.Getter, scheme *runtime.Scheme, strategy rest.RESTUpdateStrategy, kind Kind, previewer Previewer) *PreviewREST {
	return &PreviewREST{store: store, scheme: scheme, strategy: strategy, kind: kind, previewer: previewer}
}

// New returns an empty FleetPreview.
func (r *PreviewREST) New() runtime.Object { return &metacontroller.FleetPreview{} }

// Destroy has nothing to release: the store is the main resource's.
func (r *PreviewREST) Destroy() {}

// GroupVersionKind says the subresource speaks FleetPreview.
func (r *PreviewREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return v1alpha1.SchemeGroupVersion.WithKind("FleetPreview")
}

// Create previews. dryRun is accepted and changes nothing: a preview
// never writes.
func (r *PreviewREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*metacontroller.FleetPreview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a FleetPreview: %T", obj))
	}
	errs := validation.ValidateFleetPreview(name, r.kind.Name, req)
	stored, err := GetController(ctx, r.store, name)
	if err != nil {
		return nil, err
	}
	proposed, isProposed := r.kind.Propose(stored, req)
	if isProposed {
		r.strategy.PrepareForUpdate(ctx, proposed, stored)
	}
	errs = append(errs, proposedPath(r.strategy.ValidateUpdate(ctx, proposed, stored), r.kind.PreviewField)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(metacontroller.Kind("FleetPreview"), name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	versioned := &v1alpha1.FleetPreview{}
	if err := r.scheme.Convert(req, versioned, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	controller, err := r.kind.Versioned(proposed)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	status, err := r.previewer.Preview(ctx, controller, isProposed, &versioned.Spec)
	if err != nil {
		return nil, err
	}
	status.Warnings = append(r.kind.Warnings(proposed), status.Warnings...)
	versioned.Status = *status
	// Nothing of a FleetPreview is stored: nobody manages its fields.
	versioned.ManagedFields = nil
	out := &metacontroller.FleetPreview{}
	if err := r.scheme.Convert(versioned, out, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out.Name = name
	return out, nil
}

// proposedPath moves errors about the controller's spec to where the
// request holds it, spec.<specField>.
func proposedPath(errs field.ErrorList, specField string) field.ErrorList {
	for _, e := range errs {
		if e.Field == "spec" || strings.HasPrefix(e.Field, "spec.") || strings.HasPrefix(e.Field, "spec[") {
			e.Field = "spec." + specField + strings.TrimPrefix(e.Field, "spec")
		}
	}
	return errs
}
