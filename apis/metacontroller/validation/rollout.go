package validation

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
