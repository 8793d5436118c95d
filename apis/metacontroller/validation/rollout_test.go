package validation

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// rolloutKind is one kind of controller as the rollout checks see it,
// so that one table covers both.
type rolloutKind struct {
	name string
	// update validates an update of a controller at revision 3, from the
	// stored rollout old to r, with the stored status.rollout stored;
	// revision is the one the strategy numbered the update.
	update func(r, old *metacontroller.ControllerRollout, stored *metacontroller.RolloutStatus, revision int64) field.ErrorList
	// warnings are the warnings on a controller with r and limit.
	warnings func(r *metacontroller.ControllerRollout, limit *int32) []string
}

var rolloutKinds = []rolloutKind{
	{
		name: "CompositeController",
		update: func(r, old *metacontroller.ControllerRollout, stored *metacontroller.RolloutStatus, revision int64) field.ErrorList {
			oldCC, newCC := validCompositeController(), validCompositeController()
			oldCC.Spec.Rollout, oldCC.Status.Revision, oldCC.Status.Rollout = old, 3, stored
			newCC.Spec.Rollout, newCC.Status.Revision, newCC.Status.Rollout = r, revision, stored
			return ValidateCompositeControllerUpdate(newCC, oldCC, exprs)
		},
		warnings: func(r *metacontroller.ControllerRollout, limit *int32) []string {
			cc := validCompositeController()
			cc.Spec.Rollout, cc.Spec.RevisionHistoryLimit = r, limit
			return Warnings(cc, exprs)
		},
	},
	{
		name: "DecoratorController",
		update: func(r, old *metacontroller.ControllerRollout, stored *metacontroller.RolloutStatus, revision int64) field.ErrorList {
			oldDC, newDC := validDecoratorController(), validDecoratorController()
			oldDC.Spec.Rollout, oldDC.Status.Revision, oldDC.Status.Rollout = old, 3, stored
			newDC.Spec.Rollout, newDC.Status.Revision, newDC.Status.Rollout = r, revision, stored
			return ValidateDecoratorControllerUpdate(newDC, oldDC, exprs)
		},
		warnings: func(r *metacontroller.ControllerRollout, limit *int32) []string {
			dc := validDecoratorController()
			dc.Spec.Rollout, dc.Spec.RevisionHistoryLimit = r, limit
			return DecoratorWarnings(dc)
		},
	},
}

// steps is a rollout of n steps of growing shares.
func steps(n int) *metacontroller.ControllerRollout {
	r := &metacontroller.ControllerRollout{}
	for i := 1; i <= n; i++ {
		r.Steps = append(r.Steps, metacontroller.RolloutStep{Percent: ptr(int32(100 * i / n))})
	}
	return r
}

func rolloutAt(phase metacontroller.RolloutPhase, step int32, update int64) *metacontroller.RolloutStatus {
	return &metacontroller.RolloutStatus{CurrentRevision: 2, UpdateRevision: update, Step: step, Steps: 3, Phase: phase}
}

// TestStepsCannotBeCutBelowTheStepUnderWay: while the rollout of the
// revision the spec stays at is under way (not Complete), its steps must
// go on past status.rollout.step, or the driver has no step to take (R2).
// A new revision begins a new rollout at step 0, removing spec.rollout
// lands the revision, and an edit that leaves the steps alone (a pause)
// is never refused for them.
func TestStepsCannotBeCutBelowTheStepUnderWay(t *testing.T) {
	cases := []struct {
		name     string
		old, new *metacontroller.ControllerRollout
		stored   *metacontroller.RolloutStatus
		revision int64
		refused  bool
	}{
		{name: "cut to the step under way, Progressing", old: steps(3), new: steps(2), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 3), revision: 3, refused: true},
		{name: "cut below the step under way, Paused", old: steps(3), new: steps(1), stored: rolloutAt(metacontroller.RolloutPaused, 2, 3), revision: 3, refused: true},
		{name: "cut to the step under way, RolledBack", old: steps(3), new: steps(1), stored: rolloutAt(metacontroller.RolloutRolledBack, 1, 3), revision: 3, refused: true},
		{name: "added back with too few steps while a rollout is under way", new: steps(1), stored: rolloutAt(metacontroller.RolloutProgressing, 1, 3), revision: 3, refused: true},
		{name: "cut, but past the step under way", old: steps(3), new: steps(2), stored: rolloutAt(metacontroller.RolloutProgressing, 1, 3), revision: 3},
		{name: "cut after the rollout completed", old: steps(3), new: steps(1), stored: rolloutAt(metacontroller.RolloutComplete, 3, 3), revision: 3},
		{name: "cut with a new revision, which begins at step 0", old: steps(3), new: steps(1), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 3), revision: 4},
		{name: "cut while the status is of an earlier revision", old: steps(3), new: steps(1), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 2), revision: 3},
		{name: "spec.rollout removed, which lands the revision", old: steps(3), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 3), revision: 3},
		{name: "a pause leaves the steps as stored", old: steps(1), new: func() *metacontroller.ControllerRollout { r := steps(1); r.Paused = true; return r }(), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 3), revision: 3},
		{name: "steps added past the step under way", old: steps(3), new: steps(4), stored: rolloutAt(metacontroller.RolloutProgressing, 2, 3), revision: 3},
		{name: "no rollout stored", old: steps(3), new: steps(1), revision: 3},
	}
	for _, k := range rolloutKinds {
		for _, c := range cases {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				errs := k.update(c.new, c.old, c.stored, c.revision)
				if !c.refused {
					assertErrors(t, errs, nil)
					return
				}
				assertErrors(t, errs, []wantErr{inv("spec.rollout.steps")})
				want := []string{fmt.Sprintf("status.rollout.step (%d)", c.stored.Step), "revision 3", "remove spec.rollout"}
				if len(errs) == 1 && !containsAll(errs[0].Error(), want) {
					t.Errorf("message %q does not name %q", errs[0].Error(), want)
				}
			})
		}
	}
}

// TestAHistoryLimitOfZeroWithARolloutWarns: with spec.rollout, a
// revisionHistoryLimit of 0 keeps only the revisions rollouts roll from,
// so undo has nothing to go back to; the author is told, on both kinds.
func TestAHistoryLimitOfZeroWithARolloutWarns(t *testing.T) {
	cases := []struct {
		name    string
		rollout *metacontroller.ControllerRollout
		limit   *int32
		warned  bool
	}{
		{name: "limit 0 with a rollout", rollout: steps(2), limit: ptr(int32(0)), warned: true},
		{name: "limit 1 with a rollout", rollout: steps(2), limit: ptr(int32(1))},
		{name: "the default limit with a rollout", rollout: steps(2)},
		{name: "limit 0 without a rollout", limit: ptr(int32(0))},
	}
	for _, k := range rolloutKinds {
		for _, c := range cases {
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				var warned []string
				for _, w := range k.warnings(c.rollout, c.limit) {
					if strings.HasPrefix(w, "spec.revisionHistoryLimit: ") {
						warned = append(warned, w)
					}
				}
				if !c.warned {
					if len(warned) > 0 {
						t.Errorf("unexpected warnings %q", warned)
					}
					return
				}
				if len(warned) != 1 || !containsAll(warned[0], []string{"only the revisions rollouts roll from", "undo"}) {
					t.Errorf("warnings %q, want one on spec.revisionHistoryLimit saying undo has nothing to go back to", warned)
				}
			})
		}
	}
}
