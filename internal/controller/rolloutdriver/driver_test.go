package rolloutdriver

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// oneStep is a model with parents and a rollout of one step of every
// parent, its informers listed: each test below drives it by hand.
func oneStep(t *testing.T, parents int, health *string) *model {
	m := &model{t: t, rng: rand.New(rand.NewSource(1)), clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)),
		w:    &world{cache: map[types.UID]*unstructured.Unstructured{}, lastRevision: map[types.UID]int64{}, healthy: map[types.UID]bool{}},
		hook: map[int64]behaviour{1: good, 2: good}, begun: map[int64]int32{2: -1}, passed: map[int64]int32{2: -1}}
	for i := 0; i < parents; i++ {
		m.createParent()
	}
	m.w.synced = true
	m.spec = v1alpha1.ControllerRollout{Steps: []v1alpha1.RolloutStep{{Percent: ptr.To[int32](100)}},
		Health: &v1alpha1.RolloutHealth{Condition: health}, ErrorBudget: &v1alpha1.RolloutErrorBudget{MaxSyncFailures: ptr.To[int32](0)}}
	m.revision = 2
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: 1, Phase: v1alpha1.RolloutProgressing}
	m.newDriver(false)
	m.tick(2 * time.Second) // begins the step: every parent moves
	if m.stored.StepStartTime == nil {
		t.Fatalf("the step did not begin: %+v", m.stored)
	}
	return m
}

// TestThrottlingIsNotAFailure: a hook's 429 with Retry-After is the hook
// asking to come back later, which the loop does; with an error budget of
// 0 it must not fail the step (R9).
func TestThrottlingIsNotAFailure(t *testing.T) {
	m := oneStep(t, 3, nil)
	for _, p := range m.w.view() {
		m.update.rev.Load().Synced(p, parentloop.SyncOutcome{Err: &hooks.TooManyRequestsError{RetryAfter: time.Second}})
	}
	m.tick(2 * time.Second)
	if m.stored.Phase != v1alpha1.RolloutProgressing || m.stored.SyncFailures != 0 {
		t.Errorf("after 429s: %s with %d sync failures, want Progressing with none", m.stored.Phase, m.stored.SyncFailures)
	}
	m.update.rev.Load().Synced(m.w.view()[0], parentloop.SyncOutcome{Err: errors.New("hook answered 500")})
	m.tick(2 * time.Second)
	if m.stored.Phase != v1alpha1.RolloutPaused || m.stored.Reason != "ErrorBudgetExceeded" {
		t.Errorf("after a failure: %s %s, want Paused ErrorBudgetExceeded", m.stored.Phase, m.stored.Reason)
	}
}

// TestGateWaitsForTheStatusTheRevisionWrote: a parent whose cached copy is
// older than the status the update revision wrote is not judged on the
// previous revision's Ready (R8).
func TestGateWaitsForTheStatusTheRevisionWrote(t *testing.T) {
	m := oneStep(t, 1, nil)
	p := m.w.view()[0]
	_ = unstructured.SetNestedSlice(p.Object, []interface{}{map[string]interface{}{"type": "Ready", "status": "True"}}, "status", "conditions")
	m.w.lastRevision[p.GetUID()], m.w.healthy[p.GetUID()] = 2, true
	m.update.rev.Load().Synced(p, parentloop.SyncOutcome{Written: "999999"})
	m.tick(2 * time.Second)
	if m.stored.Phase == v1alpha1.RolloutComplete {
		t.Fatalf("passed on a cached parent older than the status the update revision wrote")
	}
	p.SetResourceVersion("999999")
	m.tick(2 * time.Second)
	if m.stored.Phase != v1alpha1.RolloutComplete {
		t.Errorf("once the cache has the status written: %s %q, want Complete", m.stored.Phase, m.stored.Message)
	}
}

// TestNothingMovesBeforeTheStatusIsWritten: a decision whose status could
// not be written moves no parent and announces nothing (R17).
func TestNothingMovesBeforeTheStatusIsWritten(t *testing.T) {
	m := oneStep(t, 2, nil)
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: 1, Phase: v1alpha1.RolloutProgressing}
	m.newDriver(false)
	m.failWrite = true
	events := len(m.trace)
	m.tick(2 * time.Second)
	for _, p := range m.w.view() {
		if m.update.runs(p) {
			t.Fatalf("%s moved to the update revision, and the status saying so was never written", p.GetName())
		}
	}
	for _, line := range m.trace[events:] {
		if strings.HasPrefix(line, "Event") {
			t.Errorf("recorded %q for a status never written", line)
		}
	}
}

// TestHealthErrorsAreShown: a health condition that fails to evaluate
// makes the parent fail the gate, and says why in the status and an Event
// (R7).
func TestHealthErrorsAreShown(t *testing.T) {
	m := oneStep(t, 2, ptr.To("parent.status.replicas == parent.spec.replicas"))
	for _, p := range m.w.view() {
		m.update.rev.Load().Synced(p, parentloop.SyncOutcome{})
	}
	m.tick(2 * time.Second)
	if !strings.Contains(m.stored.Message, "the health condition failed on 2 parents") {
		t.Errorf("message %q does not say the condition failed", m.stored.Message)
	}
	if !strings.Contains(strings.Join(m.trace, "\n"), "Event RolloutHealthConditionFailed") {
		t.Errorf("no Event says the condition failed")
	}
}

// TestFinishPlansNoMore: once spec.rollout is removed, every parent runs
// the update revision, and no tick plans it otherwise (R15).
func TestFinishPlansNoMore(t *testing.T) {
	m := oneStep(t, 3, nil)
	m.d.Finish()
	m.d.tick(context.Background())
	for _, p := range m.w.view() {
		if !m.update.runs(p) || m.previous.runs(p) {
			t.Errorf("%s: update %v previous %v after Finish", p.GetName(), m.update.runs(p), m.previous.runs(p))
		}
	}
}
