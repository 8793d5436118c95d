package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ValidateSyncRequest checks what the request itself must get right; what
// depends on the controller or the cluster is checked when running it.
func ValidateSyncRequest(name string, req *metacontroller.SyncRequest) field.ErrorList {
	var errs field.ErrorList
	if req.Name != "" && req.Name != name {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), req.Name, "must be empty or the CompositeController's name in the URL"))
	}
	spec := field.NewPath("spec")
	switch {
	case req.Spec.ParentRef == nil && req.Spec.Parent == nil:
		errs = append(errs, field.Required(spec.Child("parentRef"), "name a live parent with parentRef, or send one inline in parent"))
	case req.Spec.ParentRef != nil && req.Spec.Parent != nil:
		errs = append(errs, field.Invalid(spec, "parentRef and parent", "exactly one of parentRef and parent may be set"))
	case req.Spec.ParentRef != nil && req.Spec.ParentRef.Name == "":
		errs = append(errs, field.Required(spec.Child("parentRef", "name"), ""))
	case req.Spec.Parent != nil && len(req.Spec.Parent.Raw) == 0:
		errs = append(errs, field.Required(spec.Child("parent"), "an inline parent object"))
	}
	return errs
}
