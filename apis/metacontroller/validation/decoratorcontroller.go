package validation

import (
	"fmt"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ValidateDecoratorController validates a DecoratorController on creation.
// It is cluster-scoped, as a CompositeController.
func ValidateDecoratorController(dc *metacontroller.DecoratorController, exprs Expressions) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&dc.ObjectMeta, false, path.ValidatePathSegmentName, field.NewPath("metadata"))
	return append(allErrs, checkDecoratorSpec(&dc.Spec, exprs).errs...)
}

// ValidateDecoratorControllerUpdate validates an update the strategy
// prepared, as ValidateCompositeControllerUpdate: the spec has no
// immutable fields, the loop restarts with the new one, and the steps of a
// rollout under way go on past its step.
func ValidateDecoratorControllerUpdate(newDC, oldDC *metacontroller.DecoratorController, exprs Expressions) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newDC.ObjectMeta, &oldDC.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, checkDecoratorSpec(&newDC.Spec, exprs).errs...)
	return append(allErrs, validateStepsKept(newDC.Spec.Rollout, oldDC.Spec.Rollout, oldDC.Status.Rollout, newDC.Status.Revision, field.NewPath("spec"))...)
}

// ValidateDecoratorControllerStatusUpdate validates an update through the
// status subresource; the spec is the stored one.
func ValidateDecoratorControllerStatusUpdate(newDC, oldDC *metacontroller.DecoratorController) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newDC.ObjectMeta, &oldDC.ObjectMeta, field.NewPath("metadata"))
	fldPath := field.NewPath("status")
	status := &newDC.Status
	allErrs = append(allErrs, metav1validation.ValidateConditions(status.Conditions, fldPath.Child("conditions"))...)
	allErrs = append(allErrs, validateNonNegative(status.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	allErrs = append(allErrs, validateNonNegative(int64(status.Objects), fldPath.Child("objects"))...)
	allErrs = append(allErrs, validateNonNegative(int64(status.Attachments), fldPath.Child("attachments"))...)
	return allErrs
}

// DecoratorWarnings are the warnings about an accepted DecoratorController,
// each starting with the path of its field.
func DecoratorWarnings(dc *metacontroller.DecoratorController) []string {
	warnings := checkDecoratorSpec(&dc.Spec, nil).warnings
	if dc.Spec.Hooks != nil && dc.Spec.Hooks.Finalize != nil {
		warnings = append(warnings, finalizerWarnings("decoratorcontroller-", dc.Name)...)
	}
	return warnings
}

func checkDecoratorSpec(spec *metacontroller.DecoratorControllerSpec, exprs Expressions) *checker {
	c := &checker{exprs: exprs}
	fldPath := field.NewPath("spec")

	resourcesPath := fldPath.Child("resources")
	if len(spec.Resources) == 0 {
		// Required in Metacontroller's CRD; a decorator of nothing never
		// runs a hook.
		c.err(field.Required(resourcesPath, "the resources whose objects are decorated"))
	}
	firstResource := make(map[schema.GroupResource]int, len(spec.Resources))
	for i := range spec.Resources {
		r := &spec.Resources[i]
		idxPath := resourcesPath.Index(i)
		c.err(validateResourceRule(&r.ResourceRule, idxPath)...)
		c.checkDecoratedOnce(&r.ResourceRule, firstResource, i, resourcesPath)
		if r.LabelSelector != nil {
			c.err(metav1validation.ValidateLabelSelector(r.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, idxPath.Child("labelSelector"))...)
		}
		if s := r.AnnotationSelector; s != nil {
			// Metacontroller reads it as a label selector over the
			// annotations, and fails to start when it does not convert.
			c.err(validateAnnotationSelector(s, idxPath.Child("annotationSelector"))...)
		}
	}

	attachmentsPath := fldPath.Child("attachments")
	first := make(map[string]int, len(spec.Attachments))
	for i := range spec.Attachments {
		a := &spec.Attachments[i]
		c.checkChildRule(&a.ResourceRule, first, i, attachmentsPath)
		if a.UpdateStrategy != nil {
			c.checkUpdateMethod(a.UpdateStrategy.Method, attachmentsPath.Index(i).Child("updateStrategy", "method"))
		}
	}

	hooksPath := fldPath.Child("hooks")
	if spec.Hooks == nil {
		c.err(field.Required(hooksPath, "a sync hook is required"))
	} else {
		h := spec.Hooks
		c.checkCalledHooks([]namedHook{{"customize", h.Customize}, {"sync", h.Sync}, {"finalize", h.Finalize}}, spec.EndpointConfigs, hooksPath)
	}
	c.checkEndpointConfigs(spec.EndpointConfigs, fldPath.Child("endpointConfigs"))
	c.checkResyncPeriod(spec.ResyncPeriodSeconds, fldPath.Child("resyncPeriodSeconds"))
	c.checkOwnChildWrites(spec.OwnChildWrites, fldPath.Child("ownChildWrites"))
	c.checkOwnStatusWrites(spec.OwnStatusWrites, fldPath.Child("ownStatusWrites"))
	c.checkRollout(spec.Rollout, spec.RevisionHistoryLimit, fldPath)
	return c
}

// checkDecoratedOnce refuses a resource listed twice, in any two versions of
// its group: each entry would run a loop of its own on the same objects,
// and with two selectors and a finalize hook one entry's loop adds the
// shared finalizer that the other's finalizes away, forever. Metacontroller
// keys the selectors by group and kind, so its last entry silently wins;
// here the author is told.
func (c *checker) checkDecoratedOnce(rule *metacontroller.ResourceRule, first map[schema.GroupResource]int, i int, fldPath *field.Path) {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil || rule.Resource == "" {
		return
	}
	gr := schema.GroupResource{Group: gv.Group, Resource: rule.Resource}
	j, seen := first[gr]
	if !seen {
		first[gr] = i
		return
	}
	dup := field.Duplicate(fldPath.Index(i), gr.String())
	dup.Detail = fmt.Sprintf("already listed at %s: list a resource once, with one labelSelector and annotationSelector that match all the objects to decorate", fldPath.Index(j))
	c.err(dup)
}

// validateAnnotationSelector checks an annotation selector as the label
// selector Metacontroller reads it as (it fails to start a controller whose
// selector does not convert): keys and values must be valid as a label's.
func validateAnnotationSelector(s *metacontroller.AnnotationSelector, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabels(s.MatchAnnotations, fldPath.Child("matchAnnotations"))
	exprs := &metav1.LabelSelector{MatchExpressions: s.MatchExpressions}
	return append(allErrs, metav1validation.ValidateLabelSelector(exprs, metav1validation.LabelSelectorValidationOptions{}, fldPath)...)
}
