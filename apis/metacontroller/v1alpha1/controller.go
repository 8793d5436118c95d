package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Controller is what every kind of controller (CompositeController,
// DecoratorController) has in common, on the API types themselves, as
// crossplane-runtime puts its resources' differences behind accessor
// interfaces: the loop, /sync, the fleet preview and the rollout read a
// controller's revisions, rollout and author through it, and the loop
// its status, so that a third kind is a new type and its methods, not a
// new case in every switch.
//
// +k8s:deepcopy-gen=false
// +k8s:openapi-gen=false
type Controller interface {
	runtime.Object
	metav1.Object
	// GetRollout is spec.rollout; nil for none.
	GetRollout() *ControllerRollout
	// GetRolloutStatus is status.rollout; nil for none.
	GetRolloutStatus() *RolloutStatus
	// GetRevision is status.revision, the revision of the spec; 0 before
	// the server numbered it.
	GetRevision() int64
	// GetNewestRevision is the newest revision status.history keeps; 0
	// for none.
	GetNewestRevision() int64
	// GetAuthor is status.author, who last wrote the spec.
	GetAuthor() *ControllerAuthor
	// ControllerAtRevision is AtRevision as a Controller.
	ControllerAtRevision(revision int64) (Controller, bool)
	// GetLoopStatus is the part of status the loop writes, in the terms
	// every kind shares.
	GetLoopStatus() LoopStatus
	// SetLoopStatus writes s into status, in the kind's own fields; a
	// field the kind does not have is dropped, and what the server records
	// (author, revision, history) is left as it is.
	SetLoopStatus(s LoopStatus)
}

// LoopStatus is the part of a controller's status the loop writes, the same
// for every kind, so that the loop keeps one status whatever the kind and
// each kind maps it to its own fields (a DecoratorController's parents are
// its objects). The loop's controllerstatus.Status is this type.
//
// It is never served nor stored, so it has no OpenAPI definition, and no
// DeepCopy: it is a view of a kind's status, which the kind's DeepCopy
// copies.
//
// +k8s:deepcopy-gen=false
// +k8s:openapi-gen=false
type LoopStatus struct {
	ObservedGeneration int64
	Conditions         []metav1.Condition
	Parents, Children  int32
	// RollingParents is always 0 for a DecoratorController, which has no
	// rolling updates.
	RollingParents int32
	PausedParents  int32
	LastSyncTime   *metav1.Time
	LastSyncError  string
	Rollout        *RolloutStatus
}

var (
	_ Controller = &CompositeController{}
	_ Controller = &DecoratorController{}
)

func (c *CompositeController) GetRollout() *ControllerRollout   { return c.Spec.Rollout }
func (c *CompositeController) GetRolloutStatus() *RolloutStatus { return c.Status.Rollout }
func (c *CompositeController) GetRevision() int64               { return c.Status.Revision }
func (c *CompositeController) GetAuthor() *ControllerAuthor     { return c.Status.Author }
func (c *CompositeController) GetNewestRevision() int64 {
	if len(c.Status.History) == 0 {
		return 0
	}
	return c.Status.History[0].Revision // newest first
}
func (c *CompositeController) ControllerAtRevision(revision int64) (Controller, bool) {
	if at, ok := c.AtRevision(revision); ok {
		return at, true
	}
	return nil, false
}

func (c *CompositeController) GetLoopStatus() LoopStatus {
	st := &c.Status
	return LoopStatus{ObservedGeneration: st.ObservedGeneration, Conditions: st.Conditions, Parents: st.Parents, Children: st.Children,
		RollingParents: st.RollingParents, PausedParents: st.PausedParents, LastSyncTime: st.LastSyncTime, LastSyncError: st.LastSyncError,
		Rollout: st.Rollout}
}
func (c *CompositeController) SetLoopStatus(s LoopStatus) {
	st := &c.Status
	st.ObservedGeneration, st.Conditions, st.Parents, st.Children = s.ObservedGeneration, s.Conditions, s.Parents, s.Children
	st.RollingParents, st.PausedParents, st.LastSyncTime, st.LastSyncError = s.RollingParents, s.PausedParents, s.LastSyncTime, s.LastSyncError
	st.Rollout = s.Rollout
}

func (c *DecoratorController) GetRollout() *ControllerRollout   { return c.Spec.Rollout }
func (c *DecoratorController) GetRolloutStatus() *RolloutStatus { return c.Status.Rollout }
func (c *DecoratorController) GetRevision() int64               { return c.Status.Revision }
func (c *DecoratorController) GetAuthor() *ControllerAuthor     { return c.Status.Author }
func (c *DecoratorController) GetNewestRevision() int64 {
	if len(c.Status.History) == 0 {
		return 0
	}
	return c.Status.History[0].Revision // newest first
}
func (c *DecoratorController) ControllerAtRevision(revision int64) (Controller, bool) {
	if at, ok := c.AtRevision(revision); ok {
		return at, true
	}
	return nil, false
}

// A DecoratorController's parents are its objects, their children its
// attachments; it has no rolling updates, so no rollingParents.
func (c *DecoratorController) GetLoopStatus() LoopStatus {
	st := &c.Status
	return LoopStatus{ObservedGeneration: st.ObservedGeneration, Conditions: st.Conditions, Parents: st.Objects, Children: st.Attachments,
		PausedParents: st.PausedObjects, LastSyncTime: st.LastSyncTime, LastSyncError: st.LastSyncError, Rollout: st.Rollout}
}
func (c *DecoratorController) SetLoopStatus(s LoopStatus) {
	st := &c.Status
	st.ObservedGeneration, st.Conditions, st.Objects, st.Attachments = s.ObservedGeneration, s.Conditions, s.Parents, s.Children
	st.PausedObjects, st.LastSyncTime, st.LastSyncError, st.Rollout = s.PausedParents, s.LastSyncTime, s.LastSyncError, s.Rollout
}
