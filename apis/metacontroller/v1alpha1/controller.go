package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Controller is what every kind of controller (CompositeController,
// DecoratorController) has in common, on the API types themselves, as
// crossplane-runtime puts its resources' differences behind accessor
// interfaces: the loop, /sync, the fleet preview and the rollout read a
// controller's revisions, rollout and author through it, so that a third
// kind is a new type and its methods, not a new case in every switch.
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
