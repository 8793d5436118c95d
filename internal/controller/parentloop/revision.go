package parentloop

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
)

// Revision is what a rollout asks of the loop of one revision of a
// controller while two of them run at once (internal/rollout): which parents
// this loop syncs, and how each of its syncs ended. Both loops take turns
// on a parent at the server's Gate, and each asks Runs after its turn
// begins, so that a parent is never synced by two revisions at once.
type Revision struct {
	// Runs tells whether this loop syncs the parent now.
	Runs func(parent metav1.Object) bool
	// Synced, when set, is told how each sync this loop ran ended.
	Synced func(parent *unstructured.Unstructured, sync SyncOutcome)
}

// SyncOutcome is how one sync of a parent ended, for a rollout's gate.
type SyncOutcome struct {
	Err error
	// Written is the resourceVersion of the sync's last write of the
	// parent (its status), "" when it wrote none: the gate reads the
	// parent's health only once its cache is at least that new (R8).
	Written string
	// StatusDeferred says the sync left the status to the sync after
	// its children's echoes: the gate waits for that one.
	StatusDeferred bool
}

// SetRevision makes the loop sync only the parents rev runs, from its
// next turn on a parent: before Start, or while it runs (the loop that
// ran every parent becomes the previous revision's of a rollout).
func (r *Run) SetRevision(rev Revision) {
	for _, pc := range r.pcs {
		pc.revision.Store(&rev)
	}
}

// Parents are the parents the controller handles, from the informers'
// caches, whichever revision syncs them: not copies, not to be changed.
func (r *Run) Parents() []*unstructured.Unstructured {
	var parents []*unstructured.Unstructured
	for _, pc := range r.pcs {
		if pc.parents == nil {
			continue
		}
		for _, obj := range pc.parents.Informer().GetStore().List() {
			if u, ok := obj.(*unstructured.Unstructured); ok && pc.rec.Def.Handles(u) {
				parents = append(parents, u)
			}
		}
	}
	return parents
}

// runs tells whether this loop syncs parent: not when another revision
// of the controller does.
func (pc *parentLoop) runs(parent metav1.Object) bool {
	rev := pc.revision.Load()
	return rev == nil || rev.Runs(parent)
}

// revisionSynced tells the revision how the sync of parent ended.
func (pc *parentLoop) revisionSynced(parent *unstructured.Unstructured, res *reconcile.Result, err error) {
	rev := pc.revision.Load()
	if rev == nil || rev.Synced == nil {
		return
	}
	out := SyncOutcome{Err: err, StatusDeferred: res.StatusDeferred}
	if n := len(res.ParentWrites); n > 0 {
		out.Written = res.ParentWrites[n-1].ResourceVersion
	}
	rev.Synced(parent, out)
}

// paused tells whether parent is paused (v1alpha1.ParentPausedAnnotation).
func paused(parent *unstructured.Unstructured) bool {
	// Read in place: GetAnnotations copies them, for every parent of
	// every status count.
	v, _, _ := unstructured.NestedString(parent.Object, "metadata", "annotations", v1alpha1.ParentPausedAnnotation)
	return v == "true"
}

// markPaused says on a paused parent's status, in a Paused condition, that
// the loop does not sync it, once. The sync after the annotation is gone
// writes the hook's status, which replaces it, as any status the hook
// does not return.
func (pc *parentLoop) markPaused(ctx context.Context, parent *unstructured.Unstructured) error {
	if pc.rec.Def.Kind != definition.KindComposite || pc.rec.ParentWithoutStatus {
		// A decorated object's status is not the loop's to write.
		return nil
	}
	conditions, _, _ := unstructured.NestedSlice(parent.Object, "status", "conditions")
	kept := conditions[:0:0]
	for _, c := range conditions {
		m, _ := c.(map[string]interface{})
		if m["type"] == v1alpha1.ConditionPaused {
			if m["status"] == "True" {
				return nil
			}
			continue
		}
		kept = append(kept, c)
	}
	kept = append(kept, map[string]interface{}{
		"type": v1alpha1.ConditionPaused, "status": "True", "reason": "PausedByAnnotation",
		"message":            "not synced while annotated " + v1alpha1.ParentPausedAnnotation + "=true",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"observedGeneration": parent.GetGeneration(),
	})
	if err := unstructured.SetNestedSlice(parent.Object, kept, "status", "conditions"); err != nil {
		return err
	}
	client := pc.cfg.Dynamic
	if c := pc.actor.Clients; c != nil {
		client = c.Dynamic
	}
	_, err := client.Resource(pc.rec.Def.Parent.GVR).Namespace(parent.GetNamespace()).UpdateStatus(ctx, parent, metav1.UpdateOptions{FieldManager: pc.rec.Def.FieldManager})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Parent paused by its annotation: not synced")
	}
	return err
}

// HasSynced tells whether every parent loop's handlers have had their
// informers' initial lists: until then Parents misses parents, and a
// rollout judges no step on it.
func (r *Run) HasSynced() bool {
	for _, pc := range r.pcs {
		select {
		case <-pc.synced:
		default:
			return false
		}
	}
	return true
}
