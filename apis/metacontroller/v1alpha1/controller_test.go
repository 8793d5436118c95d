package v1alpha1

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// TestLoopStatusRoundTrip: what SetLoopStatus writes GetLoopStatus reads
// back, for each kind, in the kind's own fields; a DecoratorController has
// no rollingParents, so it reads 0 whatever was written.
func TestLoopStatusRoundTrip(t *testing.T) {
	now := metav1.Now()
	want := LoopStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
		Parents: 5, Children: 7, RollingParents: 2, PausedParents: 1, LastSyncTime: &now, LastSyncError: "hook failed",
		Rollout: &RolloutStatus{CurrentRevision: 1, UpdateRevision: 2}}

	cc := &CompositeController{}
	cc.SetLoopStatus(want)
	if got := cc.GetLoopStatus(); !reflect.DeepEqual(got, want) {
		t.Errorf("CompositeController read back %+v, want %+v", got, want)
	}
	if cc.Status.Parents != 5 || cc.Status.Children != 7 || cc.Status.RollingParents != 2 || cc.Status.PausedParents != 1 {
		t.Errorf("CompositeController status %+v: counts not in its own fields", cc.Status)
	}

	dc := &DecoratorController{}
	dc.SetLoopStatus(want)
	wantDC := want
	wantDC.RollingParents = 0
	if got := dc.GetLoopStatus(); !reflect.DeepEqual(got, wantDC) {
		t.Errorf("DecoratorController read back %+v, want %+v", got, wantDC)
	}
	if st := dc.Status; st.Objects != 5 || st.Attachments != 7 || st.PausedObjects != 1 {
		t.Errorf("DecoratorController status %+v: parents, children, paused not its objects, attachments, pausedObjects", st)
	}
}

// TestSetLoopStatusKeepsTheServersFields: the loop writes its part of the
// status only; author, revision and history, which the server records, are
// the object's as read.
func TestSetLoopStatusKeepsTheServersFields(t *testing.T) {
	author := &ControllerAuthor{Username: "alice"}
	cc := &CompositeController{Status: CompositeControllerStatus{Author: author, Revision: 4,
		History: []CompositeControllerRevision{{RevisionRecord: RevisionRecord{Revision: 3}}}}}
	dc := &DecoratorController{Status: DecoratorControllerStatus{Author: author, Revision: 4,
		History: []DecoratorControllerRevision{{RevisionRecord: RevisionRecord{Revision: 3}}}}}
	for _, c := range []Controller{cc, dc} {
		c.SetLoopStatus(LoopStatus{ObservedGeneration: 9, Parents: 1})
		if c.GetAuthor() != author || c.GetRevision() != 4 || c.GetNewestRevision() != 3 {
			t.Errorf("%T after SetLoopStatus: author %v revision %d newest %d; want alice, 4, 3", c, c.GetAuthor(), c.GetRevision(), c.GetNewestRevision())
		}
		if got := c.GetLoopStatus(); got.ObservedGeneration != 9 || got.Parents != 1 {
			t.Errorf("%T after SetLoopStatus: %+v", c, got)
		}
	}
}
