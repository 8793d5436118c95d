package reconcile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// syncFinalizer puts the finalizer on a live parent when the controller has
// a finalize hook, and takes it off when the controller no longer has one,
// even from a parent being deleted: otherwise that parent would hang in
// Terminating. It returns nil when the parent is gone.
func (c *Controller) syncFinalizer(ctx context.Context, env Env, parent *unstructured.Unstructured, res *Result) (*unstructured.Unstructured, error) {
	has := definition.HasFinalizer(parent, c.Def.Finalizer)
	want := c.Hooks.HasFinalize()
	switch {
	case want && !has && parent.GetDeletionTimestamp() == nil:
		updated, err := apply.SetFinalizer(ctx, env.Client, c.Def.Parent.GVR, parent, c.Def.Finalizer, true)
		if err != nil {
			return nil, err
		}
		res.FinalizerAdded = updated != nil
		if updated != nil {
			res.ParentWrites = append(res.ParentWrites, ParentWrite{ResourceVersion: updated.GetResourceVersion()})
		}
		return updated, nil
	case !want && has:
		return c.removeFinalizer(ctx, env, parent, res)
	}
	return parent, nil
}

// removeFinalizer takes the controller's finalizer off the parent and
// records the write in res. It returns nil when the parent went with it.
func (c *Controller) removeFinalizer(ctx context.Context, env Env, parent *unstructured.Unstructured, res *Result) (*unstructured.Unstructured, error) {
	updated, err := apply.SetFinalizer(ctx, env.Client, c.Def.Parent.GVR, parent, c.Def.Finalizer, false)
	if err != nil {
		return nil, err
	}
	res.FinalizerRemoved = true
	if updated != nil {
		res.ParentWrites = append(res.ParentWrites, ParentWrite{ResourceVersion: updated.GetResourceVersion()})
	}
	return updated, nil
}

// finalizerGoes tells whether the finalizer comes off the parent after its
// plan was carried out: when the finalize hook answered finalized and the
// plan succeeded, or failed for longer than the finalize grace.
func (c *Controller) finalizerGoes(env Env, opts Options, parent *unstructured.Unstructured, plan *engine.Plan, applyErr error) bool {
	if !plan.Finalizing || !plan.Response.Finalized || !definition.HasFinalizer(parent, c.Def.Finalizer) {
		return false
	}
	return applyErr == nil || c.finalizeGraceOver(env, opts, parent, applyErr)
}

// finalizeGraceOver tells whether a finalized parent whose plan failed has
// waited its finalize grace, and says so in an Event either way. Our order
// (the plan, then the finalizer) lets the finalize hook see its children
// go; Metacontroller removes the finalizer first and leaves them to the
// garbage collector. A delete that keeps failing (an admission webhook
// refusing it, say) must not keep the parent Terminating for good: past the
// grace, the finalizer goes and the garbage collector takes over, as in
// Metacontroller.
func (c *Controller) finalizeGraceOver(env Env, opts Options, parent *unstructured.Unstructured, applyErr error) bool {
	grace := c.FinalizeGrace
	if grace <= 0 {
		grace = DefaultFinalizeGrace
	}
	deleted := parent.GetDeletionTimestamp()
	if deleted == nil {
		return false
	}
	if time.Since(deleted.Time) < grace {
		c.event(env, opts, parent, corev1.EventTypeWarning, "FinalizeIncomplete",
			fmt.Sprintf("the finalize hook answered finalized but the plan failed (%v); retrying, and the finalizer %s is removed anyway at %s",
				applyErr, c.Def.Finalizer, deleted.Add(grace).UTC().Format(time.RFC3339)))
		return false
	}
	c.event(env, opts, parent, corev1.EventTypeWarning, "FinalizerRemoved",
		fmt.Sprintf("the finalize hook answered finalized %s ago and the plan still fails (%v): the finalizer %s is removed, and the garbage collector deletes what the parent owns",
			time.Since(deleted.Time).Round(time.Second), applyErr, c.Def.Finalizer))
	return true
}
