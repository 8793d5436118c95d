package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(d))
	return &t
}

// threeSteps is 10 %, then 50 % after a minute, then every parent.
func threeSteps() *v1alpha1.ControllerRollout {
	return &v1alpha1.ControllerRollout{Steps: []v1alpha1.RolloutStep{
		{Percent: ptr.To[int32](10), PauseSeconds: ptr.To[int32](60)},
		{Percent: ptr.To[int32](50)},
		{Percent: ptr.To[int32](100)},
	}, OnFailure: ptr.To(v1alpha1.RolloutRollback)}
}

func progressing(step int32, started *metav1.Time, limit int32) *v1alpha1.RolloutStatus {
	return &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: 3, Step: step, Phase: v1alpha1.RolloutProgressing,
		StepStartTime: started, BucketLimit: limit}
}

func synced(t Tally) View { return View{Synced: true, Tally: t} }

// TestStep is the rollout's state machine, one decision at a time; each
// case names the finding of the December review it holds to.
func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		// want is the status's phase, step, reason and bucket limit after.
		phase  v1alpha1.RolloutPhase
		step   int32
		reason string
		limit  int32
		moved  bool
		events []string
	}{{
		name:  "a step is not judged on a view that has not listed (R1)",
		in:    Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Minute)},
		phase: v1alpha1.RolloutProgressing, step: 0, limit: 1000,
	}, {
		name:  "nor begun on one (R1)",
		in:    Input{Spec: threeSteps(), Status: progressing(1, nil, 1000), Now: t0.Add(time.Minute)},
		phase: v1alpha1.RolloutProgressing, step: 1, limit: 1000,
	}, {
		name:  "a step whose parents are none passes on a synced view: it moved none",
		in:    Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Second), View: synced(Tally{})},
		phase: v1alpha1.RolloutProgressing, step: 1, reason: "StepPassed", limit: 1000,
		events: []string{"RolloutStepPassed"},
	}, {
		name:  "a step with a parent not healthy waits for it",
		in:    Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Second), View: synced(Tally{Updated: 2, Healthy: 1, Failing: []string{"ns/a"}})},
		phase: v1alpha1.RolloutProgressing, step: 0, reason: "WaitingForHealthy", limit: 1000,
	}, {
		name:  "and fails past its deadline: rolled back, every parent moves back",
		in:    Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(6 * time.Minute), View: synced(Tally{Updated: 2, Healthy: 1, Failing: []string{"ns/a"}})},
		phase: v1alpha1.RolloutRolledBack, step: 0, reason: "HealthCheckFailed", limit: 1000, moved: true,
		events: []string{"RolloutRolledBack"},
	}, {
		name:  "paused parents are neither moved nor failing, and the status says so (R6)",
		in:    Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Second), View: synced(Tally{Updated: 1, Healthy: 1, Paused: 1})},
		phase: v1alpha1.RolloutProgressing, step: 1, reason: "StepPassed", limit: 1000,
		events: []string{"RolloutStepPassed"},
	}, {
		name:  "the next step begins after its pause, with its move",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutProgressing, BucketLimit: 1000, NextStepTime: at(time.Minute)}, Now: t0.Add(61 * time.Second), View: View{Synced: true}},
		phase: v1alpha1.RolloutProgressing, step: 1, reason: "StepBegun", limit: 5000, moved: true,
		events: []string{"RolloutStepBegun"},
	}, {
		name:  "a pause between two steps keeps the next one's move for the resume (R4)",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutPaused, Reason: ReasonPausedByUser, BucketLimit: 1000}, Now: t0, View: View{Synced: true}},
		phase: v1alpha1.RolloutProgressing, step: 1, reason: "Resumed", limit: 1000,
		events: []string{"RolloutResumed"},
	}, {
		name:  "a pause leaves a rolled-back rollout rolled back (R5)",
		in:    Input{Spec: paused(threeSteps()), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutRolledBack, Reason: "HealthCheckFailed", BucketLimit: 5000, PausedTime: at(0)}, Now: t0, View: View{Synced: true}},
		phase: v1alpha1.RolloutRolledBack, step: 1, reason: "HealthCheckFailed", limit: 5000,
	}, {
		name:  "a status an earlier server paused over a rollback is rolled back again (R5, upgrade)",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutPaused, Reason: ReasonPausedByUser, BucketLimit: 5000, PausedTime: at(0)}, Now: t0, View: View{Synced: true}},
		phase: v1alpha1.RolloutRolledBack, step: 1, reason: "StepFailed", limit: 5000, moved: true,
	}, {
		name:  "a resume after the failure begins again at the first step",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutRolledBack, Reason: "HealthCheckFailed", BucketLimit: 5000, PausedTime: at(0)}, ResumedAt: t0.Add(time.Second), Now: t0.Add(time.Second), View: View{Synced: true}},
		phase: v1alpha1.RolloutProgressing, step: 0, reason: "Resumed", limit: 0, moved: true,
		events: []string{"RolloutResumed"},
	}, {
		name:  "a resume within the failure's second resumes it (pausedTime is stored to the second)",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutRolledBack, Reason: "HealthCheckFailed", BucketLimit: 5000, PausedTime: at(0)}, ResumedAt: t0.Add(380 * time.Millisecond), Now: t0.Add(time.Second), View: View{Synced: true}},
		phase: v1alpha1.RolloutProgressing, step: 0, reason: "Resumed", limit: 0, moved: true,
		events: []string{"RolloutResumed"},
	}, {
		name:  "a resume asked before the failure does not resume it",
		in:    Input{Spec: threeSteps(), Status: &v1alpha1.RolloutStatus{UpdateRevision: 2, Steps: 3, Step: 1, Phase: v1alpha1.RolloutRolledBack, Reason: "HealthCheckFailed", BucketLimit: 5000, PausedTime: at(0)}, ResumedAt: t0.Add(-time.Second), Now: t0.Add(time.Second), View: View{Synced: true}},
		phase: v1alpha1.RolloutRolledBack, step: 1, reason: "HealthCheckFailed", limit: 5000,
	}, {
		name:  "steps cut below the step under way hold at the last step, which begins again (R2)",
		in:    Input{Spec: &v1alpha1.ControllerRollout{Steps: threeSteps().Steps[:1]}, Status: progressing(2, at(0), 5000), Now: t0.Add(time.Second), View: View{Synced: true}},
		phase: v1alpha1.RolloutProgressing, step: 0, reason: "StepBegun", limit: 5000, moved: true,
		events: []string{"RolloutStepBegun"},
	}, {
		name:  "nor held on a view that has not listed: the index stays past the steps, whose plan is every step's",
		in:    Input{Spec: &v1alpha1.ControllerRollout{Steps: threeSteps().Steps[:1]}, Status: progressing(2, at(0), 5000), Now: t0.Add(time.Second)},
		phase: v1alpha1.RolloutProgressing, step: 2, limit: 5000,
	}, {
		name:  "the error budget spent fails the step at once",
		in:    Input{Spec: withBudget(threeSteps(), 0), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Second), View: synced(Tally{Updated: 1, SyncFailures: 1, Failing: []string{"ns/a"}})},
		phase: v1alpha1.RolloutRolledBack, step: 0, reason: "ErrorBudgetExceeded", limit: 1000, moved: true,
		events: []string{"RolloutRolledBack"},
	}, {
		name:  "the last step passed completes the rollout",
		in:    Input{Spec: threeSteps(), Status: progressing(2, at(0), 10000), Now: t0.Add(time.Second), View: synced(Tally{Updated: 3, Healthy: 3})},
		phase: v1alpha1.RolloutComplete, step: 3, reason: "RolloutComplete", limit: 10000, moved: true,
		events: []string{"RolloutStepPassed", "RolloutComplete"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.Status.DeepCopy()
			d := Step(tc.in)
			st := d.Status
			if st.Phase != tc.phase || st.Step != tc.step || st.BucketLimit != tc.limit || (tc.reason != "" && st.Reason != tc.reason) {
				t.Errorf("status %s step %d reason %s limit %d; want %s step %d reason %s limit %d (message %q)",
					st.Phase, st.Step, st.Reason, st.BucketLimit, tc.phase, tc.step, tc.reason, tc.limit, st.Message)
			}
			if d.Moved != tc.moved {
				t.Errorf("moved %v, want %v", d.Moved, tc.moved)
			}
			var reasons []string
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason)
			}
			if len(reasons) != len(tc.events) || (len(reasons) > 0 && reasons[len(reasons)-1] != tc.events[len(tc.events)-1]) {
				t.Errorf("events %v, want %v", reasons, tc.events)
			}
			if tc.in.Status.Step != before.Step || tc.in.Status.Phase != before.Phase {
				t.Errorf("Step changed its input status")
			}
		})
	}
}

func paused(r *v1alpha1.ControllerRollout) *v1alpha1.ControllerRollout {
	r.Paused = true
	return r
}

func withBudget(r *v1alpha1.ControllerRollout, n int32) *v1alpha1.ControllerRollout {
	r.ErrorBudget = &v1alpha1.RolloutErrorBudget{MaxSyncFailures: ptr.To(n)}
	return r
}

// TestStepSaysWhatTheGateSaw: the status names the health condition's
// errors and the paused parents, never swallowing them (R6, R7).
func TestStepSaysWhatTheGateSaw(t *testing.T) {
	d := Step(Input{Spec: threeSteps(), Status: progressing(0, at(0), 1000), Now: t0.Add(time.Second),
		View: synced(Tally{Updated: 2, Failing: []string{"ns/a", "ns/b"}, Paused: 1, HealthErrors: 2, HealthError: `no such key: replicas`})})
	want := "step 1 of 3: 0 of 2 parents healthy; 1 paused parents not gated; the health condition failed on 2 parents: no such key: replicas"
	if d.Status.Message != want {
		t.Errorf("message %q, want %q", d.Status.Message, want)
	}
}

// TestMaxParentsMovesNoMoreThanItSaw: a step of maxParents on a view of
// fewer parents moves those, never every bucket (R1: an empty view moved
// every parent that came later).
func TestMaxParentsMovesNoMoreThanItSaw(t *testing.T) {
	step := v1alpha1.RolloutStep{MaxParents: ptr.To[int32](5)}
	if got := LimitOf(step, 0, nil); got != 0 {
		t.Errorf("no parents seen: limit %d, want 0", got)
	}
	ps := parents(3)
	got := LimitOf(step, 0, ps)
	if n := updated(&Plan{BucketLimit: got}, ps); n != 3 {
		t.Errorf("3 parents seen: %d moved, want 3", n)
	}
	if got == Buckets {
		t.Errorf("3 parents seen: limit %d moves every parent to come", got)
	}
}

// TestStepsCutKeepTheHeldStepsParents: steps cut below the step under way
// never move a parent of the step held back to the current revision, not
// even for a tick (model seed 1796680301933509727: a canary parent went
// back, was synced by the current revision, and the step held passed on
// the update revision's earlier result).
func TestStepsCutKeepTheHeldStepsParents(t *testing.T) {
	canary := &metav1.ObjectMeta{Name: "p15", UID: "p15", Labels: map[string]string{"canary": "true"}}
	steps := []v1alpha1.RolloutStep{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}},
		{MaxParents: ptr.To[int32](4)},
	}
	// Step 1 (the canary) passed, step 2 not begun; then cut to the canary.
	passed := &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: 2, Step: 1, Phase: v1alpha1.RolloutProgressing}
	cut := &v1alpha1.ControllerRollout{Steps: steps[:1]}
	for _, view := range []View{{}, {Synced: true}} {
		st := passed.DeepCopy()
		Upgrade(st, cut)
		d := Step(Input{Spec: cut, Status: st, Now: t0, View: view})
		for what, status := range map[string]*v1alpha1.RolloutStatus{"upgraded": st, "decided": &d.Status} {
			plan, err := NewPlan(cut.Steps, status)
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Updated(canary) {
				t.Errorf("view synced %v: the %s status (step %d of %d, began %v) moves the canary back", view.Synced, what, status.Step, status.Steps, status.StepStartTime)
			}
		}
		if view.Synced && (d.Status.Step != 0 || d.Status.StepStartTime == nil || !d.Moved) {
			t.Errorf("on a synced view the last step begins again: step %d began %v moved %v", d.Status.Step, d.Status.StepStartTime, d.Moved)
		}
	}
}
