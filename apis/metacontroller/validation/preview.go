package validation

import (
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ValidateFleetPreview checks what the request itself must get right; the
// proposed controller is validated as an update of the stored one, by the
// registry, which has it.
//
// kind is the kind of the controller previewed: a request proposes a spec
// of that kind only.
func ValidateFleetPreview(name, kind string, req *metacontroller.FleetPreview) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if kind != "CompositeController" && req.Spec.CompositeController != nil {
		errs = append(errs, field.Forbidden(spec.Child("compositeController"), "a "+kind+" is previewed with spec.decoratorController"))
	}
	if kind != "DecoratorController" && req.Spec.DecoratorController != nil {
		errs = append(errs, field.Forbidden(spec.Child("decoratorController"), "a "+kind+" is previewed with spec.compositeController"))
	}
	if req.Name != "" && req.Name != name {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), req.Name, "must be empty or the controller's name in the URL"))
	}
	if req.Spec.Limit < 0 {
		errs = append(errs, field.Invalid(spec.Child("limit"), req.Spec.Limit, "must be 0 (the server's default) or more"))
	}
	if req.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(req.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	return errs
}
