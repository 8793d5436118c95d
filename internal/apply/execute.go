package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// Done is one thing a plan's execution did to a child.
type Done struct {
	Action v1alpha1.SyncAction
	GVR    schema.GroupVersionResource
	Kind   string
	// Namespace and Name of the child.
	Namespace, Name string
	// Reason is why it was done, the plan item's.
	Reason string
	// Err is why it failed; nil when it was done.
	Err error
	// Stored is, for a Create or Update, the child applied and where the
	// API server stored it.
	Stored Stored
}

func (d Done) String() string { return string(d.Action) + " " + d.Child() }

// Wrote tells whether the child was created, changed or deleted, so that
// a watch event will echo the write: adoptions, releases and takeovers
// are not counted.
func (d Done) Wrote() bool {
	if d.Err != nil {
		return false
	}
	switch d.Action {
	case v1alpha1.SyncActionCreate, v1alpha1.SyncActionUpdate:
		return d.Stored.ResourceVersion != "" && !d.Stored.Unchanged
	case v1alpha1.SyncActionDelete, v1alpha1.SyncActionRecreate:
		return true
	}
	return false
}

// Child names the child: its kind, namespace and name.
func (d Done) Child() string {
	if d.Namespace != "" {
		return d.Kind + " " + d.Namespace + "/" + d.Name
	}
	return d.Kind + " " + d.Name
}

// ActionTakeOver is what Done says of a child taken over from
// Metacontroller's field manager (Item.Takeover).
const ActionTakeOver v1alpha1.SyncAction = "TakeOver"

// Execute carries out a plan: adoptions and releases first, then applies
// and deletes. It goes on after a failure and returns every failure
// aggregated, so that one bad child does not hold the others back. Items
// that change nothing are not reported.
func Execute(ctx context.Context, client dynamic.Interface, meta metadata.Interface, controller string, parent *unstructured.Unstructured, plan *engine.Plan) ([]Done, error) {
	logger := klog.FromContext(ctx)
	ref := engine.ControllerRef(parent)
	if err := Revisions(ctx, client, plan.Rollout); err != nil {
		// The revisions say which child follows which state of the parent:
		// without them stored, moving a child could lose track of it.
		return nil, &RevisionsError{Err: err}
	}
	var done []Done
	var errs []error
	for _, item := range plan.Items {
		obj := item.Desired
		if obj == nil {
			obj = item.Observed
		}
		d := Done{Action: item.Action, GVR: item.GVR, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Reason: item.Reason}
		if item.Takeover != nil && item.Observed != nil {
			// Before the apply, so that the apply prunes what Metacontroller
			// set and the hook dropped.
			t := d
			t.Action = ActionTakeOver
			t.Err = takeOver(ctx, client, item.GVR, item.Observed, item.Takeover)
			done = append(done, t)
			if t.Err != nil {
				errs = append(errs, fmt.Errorf("can't %s: %w", t, t.Err))
				continue
			}
		}
		switch item.Action {
		case v1alpha1.SyncActionUnchanged:
			continue
		case v1alpha1.SyncActionAdopt:
			d.Err = setControllerRef(ctx, client, item.GVR, item.Observed, &ref)
		case v1alpha1.SyncActionOrphan:
			d.Err = setControllerRef(ctx, client, item.GVR, item.Observed, nil)
		case v1alpha1.SyncActionCreate, v1alpha1.SyncActionUpdate:
			child := engine.WithOwnerReferences(item.Desired, engine.ChildOwnerReferences(parent, item.Desired))
			d.Stored, d.Err = ChildMetadata(ctx, meta, item.GVR, child, controller)
			d.Stored.Unchanged = d.Err == nil && item.Observed != nil && d.Stored.ResourceVersion == item.Observed.GetResourceVersion()
		case v1alpha1.SyncActionRecreate, v1alpha1.SyncActionDelete:
			// Recreate deletes now; the next sync, once the child is gone,
			// creates it anew.
			d.Err = deleteChild(ctx, client, item.GVR, item.Observed)
		default:
			d.Err = fmt.Errorf("unknown action %q", item.Action)
		}
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("can't %s: %w", d, d.Err))
			logger.V(2).Info("Child action failed", "action", d.Action, "kind", d.Kind, "namespace", d.Namespace, "name", d.Name, "err", d.Err)
		} else {
			logger.V(4).Info("Child action done", "action", d.Action, "kind", d.Kind, "namespace", d.Namespace, "name", d.Name)
		}
		done = append(done, d)
	}
	return done, utilerrors.NewAggregate(errs)
}

// RevisionsError is Execute's error when the rollout's ControllerRevisions
// could not be stored: then nothing else of the plan was done.
type RevisionsError struct{ Err error }

func (e *RevisionsError) Error() string {
	return fmt.Sprintf("can't store the ControllerRevisions, so no child was changed: %v", e.Err)
}

func (e *RevisionsError) Unwrap() error { return e.Err }

// Revisions stores the ControllerRevisions of a rollout: creates, updates
// (adoptions included) and deletes, in that order, stopping at the first
// failure. A revision already created (a retried sync) is fine; one
// changed since it was read fails with a conflict and the sync is retried.
func Revisions(ctx context.Context, client dynamic.Interface, r *engine.Rollout) error {
	if r == nil {
		return nil
	}
	revisions := func(rev *v1alpha1.ControllerRevision) dynamic.ResourceInterface {
		return client.Resource(definition.ControllerRevisions).Namespace(rev.Namespace)
	}
	for _, rev := range r.Create {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rev)
		if err == nil {
			_, err = revisions(rev).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("can't create ControllerRevision %s: %w", rev.Name, err)
		}
	}
	for _, rev := range r.Update {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rev)
		if err == nil {
			_, err = revisions(rev).Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("can't update ControllerRevision %s: %w", rev.Name, err)
		}
	}
	for _, rev := range r.Delete {
		uid := rev.UID
		err := revisions(rev).Delete(ctx, rev.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("can't delete ControllerRevision %s: %w", rev.Name, err)
		}
	}
	return nil
}

// takeOver sends the JSON patch that moves Metacontroller's fields of the
// observed child to this controller's field manager.
func takeOver(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, observed *unstructured.Unstructured, patch []byte) error {
	_, err := resource(client, gvr, observed.GetNamespace()).Patch(ctx, observed.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	return err
}

// deleteChild deletes exactly the object that was observed: a child
// deleted and recreated by someone else since is not touched.
func deleteChild(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, observed *unstructured.Unstructured) error {
	uid := observed.GetUID()
	background := metav1.DeletePropagationBackground
	err := resource(client, gvr, observed.GetNamespace()).Delete(ctx, observed.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &background,
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setControllerRef makes ref the object's controller (adopt), or, with a
// nil ref, removes the object's controller reference (release). The patch
// carries the object's UID and resourceVersion, so it applies only to the
// object as observed.
func setControllerRef(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, observed *unstructured.Unstructured, ref *metav1.OwnerReference) error {
	var refs []metav1.OwnerReference
	for _, r := range observed.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			continue
		}
		refs = append(refs, r)
	}
	if ref != nil {
		refs = append(refs, *ref)
	}
	patch := map[string]interface{}{
		"metadata": map[string]interface{}{
			"ownerReferences": refs,
			"uid":             observed.GetUID(),
			"resourceVersion": observed.GetResourceVersion(),
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = resource(client, gvr, observed.GetNamespace()).Patch(ctx, observed.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// ParentStatus writes the hook's status and the generation it answered
// for through the parent's status subresource, only when that changes
// something. It returns the parent as stored, nil when it wrote nothing.
//
// The parent it was given may be stale (the informer's copy, or one the
// loop read before a finalizer write): on a conflict it reads the parent
// again and writes the same status onto it, as Metacontroller's
// AtomicStatusUpdate does, unless the parent went away or was recreated
// (another UID). Giving up on a conflict instead would lose the status
// when nothing else resyncs the parent: with ignoreStatusChanges the echo
// of another writer's status change is filtered out.
func ParentStatus(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, status map[string]interface{}) (*unstructured.Unstructured, error) {
	desired := map[string]interface{}{}
	for k, v := range status {
		desired[k] = v
	}
	desired["observedGeneration"] = parent.GetGeneration()
	return writeStatus(ctx, client, gvr, parent, desired)
}

// writeStatus writes desired as parent's status through its status
// subresource when it differs, reading the parent again on a conflict. It
// returns the parent as stored, nil when it wrote nothing, or when the API
// server stored nothing of it (storedNothing).
func writeStatus(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, desired map[string]interface{}) (*unstructured.Unstructured, error) {
	r := resource(client, gvr, parent.GetNamespace())
	current := parent
	var written *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := r.Get(ctx, parent.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.GetUID() != parent.GetUID() {
				return apierrors.NewNotFound(gvr.GroupResource(), parent.GetName())
			}
			current = fresh
		}
		old, _, _ := unstructured.NestedMap(current.Object, "status")
		if equality.Semantic.DeepEqual(normalize(old), normalize(desired)) {
			return nil
		}
		updated := current.DeepCopy()
		updated.Object["status"] = desired
		stored, err := r.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			current = nil
			return err
		}
		if !storedNothing(current, stored) {
			written = stored
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("can't update the status of %s %s: %w", parent.GetKind(), parent.GetName(), err)
	}
	return written, nil
}

// storedNothing tells whether a write based on before stored nothing:
// kube-apiserver answers a write that changes no byte of the object with
// the object as it was, at the same resourceVersion, and sends no watch
// event for it. That happens whenever what differed was pruned: a
// structural status schema without observedGeneration, or without a field
// the hook sets. Awaited as an echo, such a write would resync its parent
// when the wait timed out, and make the same write again, forever.
func storedNothing(before, stored *unstructured.Unstructured) bool {
	rv := stored.GetResourceVersion()
	return rv != "" && rv == before.GetResourceVersion()
}

// normalize makes a hook's status and a stored one comparable: JSON
// numbers decode as int64 or float64 depending on who decoded them.
func normalize(m map[string]interface{}) interface{} {
	if m == nil {
		return map[string]interface{}{}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return m
	}
	var out interface{}
	if err := json.Unmarshal(data, &out); err != nil {
		return m
	}
	return out
}

func resource(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return client.Resource(gvr)
	}
	return client.Resource(gvr).Namespace(namespace)
}
