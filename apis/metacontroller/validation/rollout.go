package validation

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// validateStepsKept refuses, on an update that leaves the spec at the
// revision whose rollout is under way (stored, not Complete), steps that end
// at or before the step under way: the driver has no step to go on with
// (R2). revision is the revision the update leaves the spec at, as the
// strategy numbered it; a new revision begins a new rollout at its first
// step, and removing spec.rollout lands the revision, so neither is
// refused. Only a change of the steps is: a pause of a rollout stored so
// must not be refused for steps it did not cut.
func validateStepsKept(r, old *metacontroller.ControllerRollout, stored *metacontroller.RolloutStatus, revision int64, fldPath *field.Path) field.ErrorList {
	if r == nil || stored == nil || stored.Phase == metacontroller.RolloutComplete || stored.UpdateRevision != revision {
		return nil
	}
	if int32(len(r.Steps)) > stored.Step || (old != nil && apiequality.Semantic.DeepEqual(r.Steps, old.Steps)) {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Child("rollout", "steps"), len(r.Steps), fmt.Sprintf(
		"must keep more than status.rollout.step (%d) steps while the rollout of revision %d is under way; remove spec.rollout to land the revision at once, or kubectl composite rollout undo",
		stored.Step, revision))}
}

// checkRollout checks a controller's spec.rollout and
// spec.revisionHistoryLimit, of either kind.
func (c *checker) checkRollout(r *metacontroller.ControllerRollout, limit *int32, fldPath *field.Path) {
	if limit != nil && *limit < 0 {
		c.err(field.Invalid(fldPath.Child("revisionHistoryLimit"), *limit, "must be 0 or more"))
	}
	if r == nil {
		return
	}
	if limit != nil && *limit == 0 {
		c.warn(fldPath.Child("revisionHistoryLimit"), "0 with spec.rollout keeps only the revisions rollouts roll from: kubectl composite rollout undo has no earlier revision to go back to")
	}
	rolloutPath := fldPath.Child("rollout")
	stepsPath := rolloutPath.Child("steps")
	if len(r.Steps) == 0 {
		c.err(field.Required(stepsPath, "a rollout has at least one step"))
	}
	var percent int32
	for i, s := range r.Steps {
		c.checkStep(s, &percent, stepsPath.Index(i))
	}
	if h := r.Health; h != nil {
		if h.DeadlineSeconds != nil && *h.DeadlineSeconds < 1 {
			c.err(field.Invalid(rolloutPath.Child("health", "deadlineSeconds"), *h.DeadlineSeconds, "must be 1 or more"))
		}
		if h.Condition != nil && c.exprs != nil {
			if err := c.exprs.CheckHealthCondition(*h.Condition); err != nil {
				c.err(field.Invalid(rolloutPath.Child("health", "condition"), *h.Condition, err.Error()))
			}
		}
	}
	if b := r.ErrorBudget; b != nil && b.MaxSyncFailures != nil && *b.MaxSyncFailures < 0 {
		c.err(field.Invalid(rolloutPath.Child("errorBudget", "maxSyncFailures"), *b.MaxSyncFailures, "must be 0 or more"))
	}
	if p := r.OnFailure; p != nil && *p != metacontroller.RolloutPause && *p != metacontroller.RolloutRollback {
		c.err(field.NotSupported(rolloutPath.Child("onFailure"), *p, []string{string(metacontroller.RolloutPause), string(metacontroller.RolloutRollback)}))
	}
}

// checkStep checks one step: exactly one way of naming parents, and
// shares that never shrink (percent, the share of the steps so far).
func (c *checker) checkStep(s metacontroller.RolloutStep, percent *int32, fldPath *field.Path) {
	set := 0
	if s.Percent != nil {
		set++
		switch p := *s.Percent; {
		case p < 1 || p > 100:
			c.err(field.Invalid(fldPath.Child("percent"), p, "must be between 1 and 100"))
		case p < *percent:
			c.err(field.Invalid(fldPath.Child("percent"), p, fmt.Sprintf("must not be below an earlier step's %d: a step's share counts the steps before it", *percent)))
		default:
			*percent = p
		}
	}
	if s.MaxParents != nil {
		set++
		if *s.MaxParents < 1 {
			c.err(field.Invalid(fldPath.Child("maxParents"), *s.MaxParents, "must be 1 or more"))
		}
	}
	if s.Selector != nil {
		set++
		c.err(metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	if set != 1 {
		c.err(field.Invalid(fldPath, "", "exactly one of percent, maxParents and selector names the step's parents"))
	}
	if s.PauseSeconds != nil && *s.PauseSeconds < 0 {
		c.err(field.Invalid(fldPath.Child("pauseSeconds"), *s.PauseSeconds, "must be 0 or more"))
	}
}

// ParentSchema is one parent resource of a controller and its OpenAPI
// schema as the target cluster serves it (its references resolved), or
// why there is none.
type ParentSchema struct {
	// Resource names the resource in messages: "apps/v1 deployments".
	Resource string
	Schema   *spec.Schema
	// Missing says why Schema is nil: the resource is not served yet, the
	// cluster did not answer in time, ...
	Missing error
}

// ValidateHealthCost checks r's health condition against the schema of
// each parent resource it is evaluated over, as Kubernetes checks a CRD's
// validation rules: a condition that does not compile with the parent
// typed is refused, and so is one whose estimated cost of one evaluation
// exceeds the per-call limit every evaluation stops at (R7), since it
// fails on the parents that come near its worst case. Without a schema,
// or where the condition reads what the schema leaves open, the parent is
// dynamic: only the run time bounds the cost, which the warnings say. A
// condition that does not compile at all is checkRollout's to refuse.
func ValidateHealthCost(r *metacontroller.ControllerRollout, parents []ParentSchema, exprs Expressions) (field.ErrorList, []string) {
	if r == nil || r.Health == nil || r.Health.Condition == nil || exprs.CheckHealthCondition(*r.Health.Condition) != nil {
		return nil, nil
	}
	expr, fldPath := *r.Health.Condition, field.NewPath("spec", "rollout", "health", "condition")
	var errs field.ErrorList
	var warnings []string
	runTime := fmt.Sprintf("the parent is dynamic, and the condition's cost is bounded only at run time, where each evaluation stops at %d", uint64(celconfig.PerCallLimit))
	for _, p := range parents {
		if p.Schema == nil || preservesUnknownFields(p.Schema) {
			why := "its schema preserves unknown fields"
			if p.Schema == nil {
				why = fmt.Sprintf("its schema is not known: %v", p.Missing)
			}
			warnings = append(warnings, fmt.Sprintf("%s: not checked over %s, %s: %s", fldPath, p.Resource, why, runTime))
			continue
		}
		var cost struct {
			Max, Typical uint64
			Dynamic      bool
		}
		var err error
		cost.Max, cost.Typical, cost.Dynamic, err = exprs.EstimateHealthCondition(expr, p.Schema)
		limit := uint64(celconfig.PerCallLimit)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(fldPath, expr, fmt.Sprintf("over the schema of %s: %v", p.Resource, err)))
		case cost.Max <= limit:
		case cost.Dynamic:
			warnings = append(warnings, fmt.Sprintf("%s: its cost over %s has no bound: it reads parts of the parent that the schema leaves open (x-kubernetes-preserve-unknown-fields, int-or-string), so %s", fldPath, p.Resource, runTime))
		case cost.Typical > limit:
			// Over the limit on a typical parent: a loop in a loop over
			// lists the schema does not bound, or over large literals.
			errs = append(errs, field.Forbidden(fldPath, fmt.Sprintf(
				"estimated cost %d of one evaluation over %s exceeds the per-call limit %d by a factor of %s, and each evaluation stops at the limit (try simplifying the condition, or adding maxItems, maxProperties and maxLength where the parent's schema declares lists, maps and strings)",
				cost.Max, p.Resource, limit, exceedFactor(cost.Max, limit))))
		default:
			// A loop over a list the schema does not bound, which the
			// estimate sizes to fill a request (a Deployment's
			// conditions): far cheaper on any real parent, and the
			// user can't bound a built-in kind's lists.
			warnings = append(warnings, fmt.Sprintf("%s: its estimated cost over %s is %d at most, over the per-call limit %d, for lists and maps the schema does not bound; each evaluation stops at the limit, and fails the parent's gate", fldPath, p.Resource, cost.Max, limit))
		}
	}
	return errs, warnings
}

// preservesUnknownFields tells whether a schema keeps fields it does not
// declare at its root: it types nothing of the parent.
func preservesUnknownFields(s *spec.Schema) bool {
	preserves, _ := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields")
	return preserves
}

// exceedFactor says by how much cost exceeds limit, as CRD validation says
// it of a rule's estimate.
func exceedFactor(cost, limit uint64) string {
	switch f := float64(cost) / float64(limit); {
	case f > 100:
		return "more than 100x"
	case f < 1.5:
		return fmt.Sprintf("%fx", f)
	default:
		return fmt.Sprintf("%.1fx", f)
	}
}
