package fleetpreview

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// firstStepOf tells, for a proposed controller with a rollout, which
// parents its first step would move: a fleet preview of the proposal
// previews those, what landing it would do first. nil (every parent)
// without a rollout, or when the first step counts parents (maxParents),
// which needs every parent's bucket, not a page's.
func firstStepOf(controller runtime.Object) func(metav1.Object) bool {
	var r *v1alpha1.ControllerRollout
	if c, ok := controller.(v1alpha1.Controller); ok {
		r = c.GetRollout()
	}
	if r == nil || len(r.Steps) == 0 || r.Steps[0].MaxParents != nil {
		return nil
	}
	// The first step, begun.
	began := metav1.Now()
	status := &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, BucketLimit: rollout.LimitOf(r.Steps[0], 0, nil), StepStartTime: &began}
	plan, err := rollout.NewPlan(r.Steps, status)
	if err != nil {
		return nil
	}
	return plan.Updated
}
