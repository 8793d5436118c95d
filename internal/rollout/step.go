package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// The rollout's decisions are one function, Step: from the rollout as
// written, its status, what the loops observed and the time, the next
// status, the Events to record and whether parents move. The driver
// (internal/controller/rolloutdriver) feeds it and carries out its answer; it
// decides nothing itself. Every rule that keeps a rollout at least as safe
// as no rollout is here, where a test can drive it through any sequence
// of events (rolloutdriver's model test):
//   - no step begins or passes on a view that is not synced: a view that
//     has not listed sees no parents, and a step with no parents passes
//     (R1 of the December review);
//   - a step index past the steps written (steps cut mid-rollout) holds at
//     the last step, which begins again, and is never indexed beyond it
//     (R2);
//   - a pause between two steps keeps the next step to begin, with its
//     move (R4); a pause never overwrites a failure, so a rolled-back
//     rollout stays rolled back (R5).

// DefaultDeadline is how long a step's parents have to pass its gate
// unless spec.rollout.health.deadlineSeconds says otherwise.
const DefaultDeadline = 5 * time.Minute

// MaxFailingNamed is how many failing parents the status names.
const MaxFailingNamed = 20

// ReasonPausedByUser is the reason of a rollout paused by
// spec.rollout.paused (kubectl composite rollout pause).
const ReasonPausedByUser = "PausedByUser"

// Input is what one decision of a rollout depends on.
type Input struct {
	// Spec is spec.rollout as written now.
	Spec *v1alpha1.ControllerRollout
	// Status is the rollout's status as the driver holds it.
	Status *v1alpha1.RolloutStatus
	// ResumedAt is when a resume after a failed step was last asked for
	// (v1alpha1.RolloutResumedAnnotation), zero for never.
	ResumedAt time.Time
	// Now is the time of the decision; Began when the driver began: a
	// step's deadline counts from it at the earliest, for the syncs of a
	// restarted server.
	Now, Began time.Time
	// View is what the loops observed.
	View View
}

// View is what the loops observed of the controller's parents.
type View struct {
	// Synced says every informer the rollout reads has listed, and every
	// replica whose parents count has reported: no step begins or passes
	// otherwise.
	Synced bool
	// Waiting are the parents not yet on the update revision, for the
	// share of a step of maxParents; read only when a step begins.
	Waiting []metav1.Object
	// Tally is the gate's view of the parents the step moved.
	Tally Tally
}

// Event is an Event to record on the controller.
type Event struct{ Type, Reason, Message string }

// Decision is what the driver carries out: the status to write, and once
// it is written, the Events and the parents' moves.
type Decision struct {
	Status v1alpha1.RolloutStatus
	Events []Event
	// Moved says the plan of Status moves parents from one revision to
	// the other: the driver plans again and queues them.
	Moved bool
	// Resync says the parents moved so far are synced again for the
	// gate, whose results so far no longer count (a resumed step).
	Resync bool
	// Gated says the gate passed or failed the step on View.Tally: with
	// --shards, the driver writes it only while the reports stored still
	// sum to that tally.
	Gated bool
}

// Step is the rollout's next decision.
func Step(in Input) Decision {
	d := Decision{Status: *in.Status.DeepCopy()}
	st := &d.Status
	if st.Phase == v1alpha1.RolloutComplete || in.Spec == nil || len(in.Spec.Steps) == 0 {
		return d
	}
	if Upgrade(st, in.Spec) {
		d.Moved = true
	}
	if stop := d.pauseOrResume(in); stop || d.Resync {
		// Paused, or just resumed: a resumed step is gated from the
		// next look on, on the syncs since (its results so far no longer
		// count, and the view was not gathered for a paused rollout).
		return d
	}
	if st.Phase != v1alpha1.RolloutProgressing || !in.View.Synced {
		return d
	}
	if st.Step >= st.Steps {
		d.holdAtLastStep(in)
		return d
	}
	if st.NextStepTime != nil && in.Now.Before(st.NextStepTime.Time) {
		return d
	}
	if st.StepStartTime == nil {
		d.beginStep(in)
		return d
	}
	d.gate(in)
	return d
}

// Upgrade reads a status as this server decides on it, and says whether
// that moves parents (the driver then plans from it, as it must before its
// first decision too): an earlier server paused a failed step by
// spec.rollout.paused over the failure, rolled back or not, so that the
// failed revision ran again (R5); such a status keeps its pausedTime, and
// the failure comes back, rolled back when the rollout rolls back. A step
// index past the steps written (steps cut) is left as it is: its plan is
// that of every step written (NewPlan), and Step begins the last step
// again (holdAtLastStep).
func Upgrade(st *v1alpha1.RolloutStatus, spec *v1alpha1.ControllerRollout) (moved bool) {
	if st.Phase == v1alpha1.RolloutComplete || spec == nil || len(spec.Steps) == 0 {
		return false
	}
	st.Steps = int32(len(spec.Steps))
	if st.Phase != v1alpha1.RolloutPaused || st.Reason != ReasonPausedByUser || st.PausedTime == nil {
		return false
	}
	st.Reason, st.Message = "StepFailed", "a failed step, paused by spec.rollout.paused on an earlier server"
	if p := spec.OnFailure; p != nil && *p == v1alpha1.RolloutRollback {
		st.Phase = v1alpha1.RolloutRolledBack
		return true
	}
	return false
}

// holdAtLastStep keeps the step index within the steps written: steps cut
// below it mid-rollout hold the rollout at the last step, which begins
// again at once, so that its share is moved and gated (R2). Never an index
// past the steps, and never the last step "not yet begun" in between: the
// plan of that status leaves out the last step's selector, and would move
// its parents back to the current revision for a tick, and their results
// with them.
func (d *Decision) holdAtLastStep(in Input) {
	st := &d.Status
	if st.Step < st.Steps {
		return
	}
	st.Step = st.Steps - 1
	d.beginStep(in)
	st.Message += " again: spec.rollout.steps were cut below the step under way"
}

// failed tells whether the rollout was stopped by a failed step.
func failed(st *v1alpha1.RolloutStatus) bool {
	return st.Phase == v1alpha1.RolloutRolledBack || (st.Phase == v1alpha1.RolloutPaused && st.Reason != ReasonPausedByUser)
}

// pauseOrResume follows spec.rollout.paused and a resume asked for after a
// failed step; stop says the rollout is not progressing.
func (d *Decision) pauseOrResume(in Input) (stop bool) {
	st := &d.Status
	userPaused := st.Phase == v1alpha1.RolloutPaused && st.Reason == ReasonPausedByUser
	switch {
	case in.Spec.Paused && st.Phase == v1alpha1.RolloutProgressing:
		st.Phase, st.Reason, st.Message = v1alpha1.RolloutPaused, ReasonPausedByUser, "spec.rollout.paused is true"
		d.event(corev1.EventTypeNormal, "RolloutPaused", "Rollout of revision %d paused at step %d of %d", st.UpdateRevision, st.Step+1, st.Steps)
		return true
	case in.Spec.Paused:
		// Paused by the user already, or by a failed step: a failure
		// stays what it is, rolled back or not, until resumed (R5).
		return true
	case userPaused:
		d.resume("resumed: spec.rollout.paused is false", in.Now)
		return false
	case failed(st):
		// Both times are the server's (the registry stamps the
		// annotation). pausedTime is stored to the second: a resume
		// within the failure's second counts as after it, as an operator
		// who resumes on seeing the failure means (and e2e does, within
		// the second); one asked a moment before a failure of the same
		// second resumes it too, which the operator had asked for.
		if in.ResumedAt.IsZero() || st.PausedTime == nil || !in.ResumedAt.After(st.PausedTime.Time) {
			return true
		}
		if st.Phase == v1alpha1.RolloutRolledBack {
			// Begins again at its first step.
			st.Step, st.StepStartTime, st.NextStepTime, st.BucketLimit = 0, nil, nil, 0
			d.Moved = true
		}
		d.resume("resumed by kubectl composite rollout resume", in.Now)
		return false
	}
	return false
}

// resume goes on with the step under way, with a new deadline and error
// budget, its parents synced again; a step not yet begun (the pause
// between two steps) begins as it would have, with its move (R4).
func (d *Decision) resume(message string, now time.Time) {
	st := &d.Status
	st.Phase, st.Reason, st.Message = v1alpha1.RolloutProgressing, "Resumed", message
	st.PausedTime, st.FailingParents, st.SyncFailures = nil, nil, 0
	if st.StepStartTime != nil {
		restart := metav1.NewTime(now.Truncate(time.Second))
		st.StepStartTime = &restart
	}
	d.Resync = true
	d.event(corev1.EventTypeNormal, "RolloutResumed", "Rollout of revision %d resumed at step %d of %d", st.UpdateRevision, st.Step+1, st.Steps)
}

// beginStep begins the step st.Step: it moves its parents.
func (d *Decision) beginStep(in Input) {
	st := &d.Status
	step := in.Spec.Steps[st.Step]
	st.BucketLimit = LimitOf(step, st.BucketLimit, in.View.Waiting)
	now := metav1.NewTime(in.Now.Truncate(time.Second))
	st.StepStartTime, st.NextStepTime, st.SyncFailures, st.FailingParents = &now, nil, 0, nil
	st.UpdatedParents, st.HealthyParents = 0, 0
	st.Reason, st.Message = "StepBegun", fmt.Sprintf("step %d of %d began", st.Step+1, st.Steps)
	d.Moved = true
	d.event(corev1.EventTypeNormal, "RolloutStepBegun", "Rollout of revision %d: step %d of %d began", st.UpdateRevision, st.Step+1, st.Steps)
}

// gate checks the step's parents: every parent moved so far must have been
// synced by the update revision and be healthy; a step that does not pass
// within its deadline, or spends its error budget, fails.
func (d *Decision) gate(in Input) {
	st := &d.Status
	t := in.View.Tally
	st.UpdatedParents, st.HealthyParents, st.SyncFailures = t.Updated, t.Healthy, t.SyncFailures
	if budget := in.Spec.ErrorBudget; budget != nil && budget.MaxSyncFailures != nil && st.SyncFailures > *budget.MaxSyncFailures {
		d.fail(in, "ErrorBudgetExceeded", fmt.Sprintf("%d syncs of revision %d failed in step %d, more than the budget of %d",
			st.SyncFailures, st.UpdateRevision, st.Step+1, *budget.MaxSyncFailures), t.Failing)
		return
	}
	if len(t.Failing) == 0 && len(t.Unreported) == 0 {
		// On a synced view: a step whose parents are none moves none.
		d.pass(in)
		return
	}
	deadline := DefaultDeadline
	if h := in.Spec.Health; h != nil && h.DeadlineSeconds != nil {
		deadline = time.Duration(*h.DeadlineSeconds) * time.Second
	}
	if since := laterOf(st.StepStartTime.Time, in.Began); in.Now.Sub(since) > deadline {
		if len(t.Failing) == 0 {
			d.fail(in, "HealthCheckFailed", fmt.Sprintf("step %d was not reported on within %s: %s", st.Step+1, deadline, t.Waiting()), nil)
			return
		}
		d.fail(in, "HealthCheckFailed", fmt.Sprintf("%d of %d parents of step %d were not synced by revision %d and healthy within %s%s",
			len(t.Failing), t.Updated, st.Step+1, st.UpdateRevision, deadline, t.notes()), t.Failing)
		return
	}
	st.Reason = "WaitingForHealthy"
	st.Message = fmt.Sprintf("step %d of %d: %d of %d parents healthy%s", st.Step+1, st.Steps, t.Healthy, t.Updated, t.notes())
	if len(t.Unreported) > 0 {
		st.Message += "; " + t.Waiting()
	}
}

// pass ends the step: the next one begins (after its pause), or the
// rollout is complete.
func (d *Decision) pass(in Input) {
	st := &d.Status
	d.Gated = true
	d.event(corev1.EventTypeNormal, "RolloutStepPassed", "Rollout of revision %d: step %d of %d passed, %d parents healthy", st.UpdateRevision, st.Step+1, st.Steps, st.HealthyParents)
	if pause := in.Spec.Steps[st.Step].PauseSeconds; pause != nil && *pause > 0 {
		next := metav1.NewTime(in.Now.Add(time.Duration(*pause) * time.Second).Truncate(time.Second))
		st.NextStepTime = &next
	}
	st.Step++
	st.StepStartTime, st.FailingParents = nil, nil
	if st.Step < st.Steps {
		st.Reason, st.Message = "StepPassed", fmt.Sprintf("step %d of %d passed", st.Step, st.Steps)
		return
	}
	st.Phase, st.Reason, st.Message = v1alpha1.RolloutComplete, "RolloutComplete", fmt.Sprintf("every parent runs revision %d", st.UpdateRevision)
	st.CurrentRevision, st.NextStepTime = st.UpdateRevision, nil
	d.Moved = true
	d.event(corev1.EventTypeNormal, "RolloutComplete", "Rollout of revision %d complete", st.UpdateRevision)
}

// fail ends the step as spec.rollout.onFailure says.
func (d *Decision) fail(in Input, reason, message string, failing []string) {
	st := &d.Status
	d.Gated = true
	now := metav1.NewTime(in.Now.Truncate(time.Second))
	st.PausedTime, st.Reason, st.Message = &now, reason, message
	st.FailingParents = failing[:min(len(failing), MaxFailingNamed):min(len(failing), MaxFailingNamed)]
	if p := in.Spec.OnFailure; p != nil && *p == v1alpha1.RolloutRollback {
		st.Phase = v1alpha1.RolloutRolledBack
		d.Moved = true
		d.event(corev1.EventTypeWarning, "RolloutRolledBack", "Rollout of revision %d rolled back to revision %d: %s", st.UpdateRevision, st.CurrentRevision, message)
		return
	}
	st.Phase = v1alpha1.RolloutPaused
	d.event(corev1.EventTypeWarning, "RolloutPaused", "Rollout of revision %d paused at step %d of %d: %s", st.UpdateRevision, st.Step+1, st.Steps, message)
}

func (d *Decision) event(eventType, reason, format string, args ...interface{}) {
	d.Events = append(d.Events, Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
