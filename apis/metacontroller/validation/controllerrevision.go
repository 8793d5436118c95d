package validation

import (
	"encoding/json"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ValidateControllerRevision checks a new ControllerRevision: a name, a
// parentPatch that is a JSON object, and children named once per kind.
func ValidateControllerRevision(rev *metacontroller.ControllerRevision) field.ErrorList {
	return validateControllerRevision(rev)
}

// ValidateControllerRevisionUpdate checks a changed ControllerRevision.
func ValidateControllerRevisionUpdate(rev, old *metacontroller.ControllerRevision) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaUpdate(&rev.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(errs, validateControllerRevision(rev)...)
}

func validateControllerRevision(rev *metacontroller.ControllerRevision) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&rev.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	patchPath := field.NewPath("parentPatch")
	var patch map[string]interface{}
	switch {
	case len(rev.ParentPatch.Raw) == 0:
		errs = append(errs, field.Required(patchPath, "the parent's revisionHistory fields, as a JSON object"))
	case json.Unmarshal(rev.ParentPatch.Raw, &patch) != nil || patch == nil:
		errs = append(errs, field.Invalid(patchPath, string(rev.ParentPatch.Raw), "must be a JSON object"))
	}
	seen := map[string]bool{}
	for i, ch := range rev.Children {
		p := field.NewPath("children").Index(i)
		if ch.Kind == "" {
			errs = append(errs, field.Required(p.Child("kind"), ""))
		}
		key := ch.Kind + "." + ch.APIGroup
		if seen[key] {
			errs = append(errs, field.Duplicate(p, key))
		}
		seen[key] = true
		for j, name := range ch.Names {
			if name == "" {
				errs = append(errs, field.Required(p.Child("names").Index(j), ""))
			}
		}
	}
	return errs
}
