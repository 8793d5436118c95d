package syncrequest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	controllerrollout "github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// atParentsRevision is controller as its loop runs it for parent: during a
// rollout (spec.rollout), a parent not yet moved to the update revision is
// synced by the current revision's spec and author, from status.history,
// so that a /sync of it calls the hooks the loop calls. It tells whether
// that is another revision than the spec's.
func atParentsRevision(controller runtime.Object, parent metav1.Object) (runtime.Object, bool) {
	c, ok := controller.(v1alpha1.Controller)
	if !ok {
		return controller, false
	}
	if rev, ok := currentRevisionOf(c.GetRollout(), c.GetRolloutStatus(), parent); ok {
		if at, ok := c.ControllerAtRevision(rev); ok {
			return at, true
		}
	}
	return controller, false
}

// currentRevisionOf is the revision of a rollout under way that syncs a
// parent not yet moved, and whether parent is one.
func currentRevisionOf(spec *v1alpha1.ControllerRollout, status *v1alpha1.RolloutStatus, parent metav1.Object) (int64, bool) {
	if spec == nil || status == nil || status.Phase == v1alpha1.RolloutComplete || status.CurrentRevision == status.UpdateRevision {
		return 0, false
	}
	plan, err := controllerrollout.NewPlan(spec.Steps, status)
	if err != nil || plan.Updated(parent) {
		return 0, false
	}
	return status.CurrentRevision, true
}

// revisionOf is the revision of the spec of controller (status.revision):
// with its UID, what a compiled controller is kept by.
func revisionOf(controller runtime.Object) int64 {
	if c, ok := controller.(v1alpha1.Controller); ok {
		return c.GetRevision()
	}
	return 0
}
