package v1alpha1

import "testing"

// TestBothKindsReadTheSameThroughController: the accessors read each
// kind's own fields, and a revision the history lacks is a nil Controller,
// not a typed nil that would pass a nil check.
func TestBothKindsReadTheSameThroughController(t *testing.T) {
	author := &ControllerAuthor{Username: "alice"}
	rollout := &ControllerRollout{}
	status := &RolloutStatus{CurrentRevision: 1, UpdateRevision: 2}
	cc := &CompositeController{Spec: CompositeControllerSpec{Rollout: rollout}, Status: CompositeControllerStatus{
		Revision: 2, Author: author, Rollout: status, History: []CompositeControllerRevision{{RevisionRecord: RevisionRecord{Revision: 1}}}}}
	dc := &DecoratorController{Spec: DecoratorControllerSpec{Rollout: rollout}, Status: DecoratorControllerStatus{
		Revision: 2, Author: author, Rollout: status, History: []DecoratorControllerRevision{{RevisionRecord: RevisionRecord{Revision: 1}}}}}
	for _, c := range []Controller{cc, dc} {
		if c.GetRollout() != rollout || c.GetRolloutStatus() != status || c.GetAuthor() != author || c.GetRevision() != 2 || c.GetNewestRevision() != 1 {
			t.Errorf("%T: accessors read rollout %p status %p author %p revision %d newest %d", c, c.GetRollout(), c.GetRolloutStatus(), c.GetAuthor(), c.GetRevision(), c.GetNewestRevision())
		}
		if at, ok := c.ControllerAtRevision(1); !ok || at.GetRevision() != 1 {
			t.Errorf("%T at revision 1: %v, %v", c, at, ok)
		}
		if at, ok := c.ControllerAtRevision(7); ok || at != nil {
			t.Errorf("%T at revision 7 (not in the history): %#v, %v; want a nil Controller", c, at, ok)
		}
	}
}
