package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
)

// Reasons of plan items, for people reading a plan.
const (
	reasonCreate = "returned by the hook and not observed"
	reasonRetake = "returned by the hook; it exists but was released (no longer matches the selector), and applying it takes it back"
	// ReasonForeign is the reason of a desired child whose name another
	// owner's object has: it is never taken over.
	ReasonForeign      = "returned by the hook, but an object of that name exists and is controlled by another owner; it is not taken over"
	reasonWaitDeletion = "waiting for the old child to be deleted"
	// reasonOnDelete: the target cluster is asked nothing about a child
	// the update method leaves alone, so the difference is the local
	// merge's, which admission may undo.
	reasonOnDelete       = "differs by the local merge, which does not see the cluster's defaulting and admission; updateStrategy OnDelete updates it only once deleted"
	reasonInPlace        = "differs; updateStrategy %s updates it in place"
	reasonRecreate       = "differs; updateStrategy %s deletes and recreates it"
	reasonDelete         = "no longer returned by the hook"
	reasonAlreadyDeleted = "no longer returned by the hook; already being deleted"
	reasonTakeover       = "last written by Metacontroller: its fields are taken over by this controller's field manager"
	reasonParentDeleting = "parent is being deleted; the garbage collector removes its children"
	reasonOlderRevision  = "follows an older ControllerRevision until the rolling update reaches it (%s)"
	reasonUnowned        = "returned by the hook, but an object of that name exists without a controller and does not match the parent's selector; it is not taken over"
	// reasonUnownedAttachment: a DecoratorController adopts no orphan
	// (definition.AdoptsOrphans).
	reasonUnownedAttachment = "returned by the hook, but an object of that name exists without a controller, and a DecoratorController adopts no orphan; it is not taken over"
)

// buildItems compares the desired children with the observed ones.
func (c *computation) buildItems(ctx context.Context, desired []desiredChild) error {
	items, err := c.claimItems(true)
	if err != nil {
		return err
	}
	// An item per desired child and per owned one at most: grown by
	// append, the slice of these large structs is copied again and again.
	items = slices.Grow(items, len(desired)+len(c.in.Children.Owned))

	known := c.knownChildren()
	wanted := map[string]bool{}
	for _, d := range desired {
		wanted[ChildKey(d.obj)] = true
		item, err := c.desiredItem(ctx, d, known)
		if err != nil {
			return err
		}
		items = append(items, item)
	}
	for _, obs := range known.order {
		if wanted[ChildKey(obs)] {
			continue
		}
		gvr, err := c.observedGVR(obs)
		if err != nil {
			return err
		}
		if obs.GetDeletionTimestamp() != nil {
			items = append(items, Item{Action: v1alpha1.SyncActionUnchanged, GVR: gvr, Observed: obs, Reason: reasonAlreadyDeleted})
			continue
		}
		items = append(items, Item{Action: v1alpha1.SyncActionDelete, GVR: gvr, Observed: obs, Reason: reasonDelete})
	}

	sortItems(items)
	c.plan.Items = items
	return nil
}

// knownChildren are the objects a desired child may be, by ChildKey, as
// the claim sorted them.
type knownChildren struct {
	// observed are the children: owned first, then the orphans being
	// adopted, which the hook saw as children too; order is theirs.
	observed map[string]*unstructured.Unstructured
	order    []*unstructured.Unstructured
	// released no longer match the selector; foreign have another
	// controller; unowned have none and are not adopted.
	released, foreign, unowned map[string]bool
}

// knownChildren sorts the claimed objects by key. A key seen twice (the
// same object listed through two versions) counts once.
func (c *computation) knownChildren() *knownChildren {
	k := &knownChildren{
		observed: map[string]*unstructured.Unstructured{},
		released: keySet(c.in.Children.Release),
		foreign:  keySet(append(append([]*unstructured.Unstructured{}, c.in.Children.Foreign...), c.in.Children.Others...)),
		unowned:  keySet(c.in.Children.Unowned),
	}
	for _, list := range [][]*unstructured.Unstructured{c.in.Children.Owned, c.in.Children.Adopt} {
		for _, obj := range list {
			if obj == nil {
				continue
			}
			key := ChildKey(obj)
			if _, dup := k.observed[key]; dup {
				continue
			}
			k.observed[key] = obj
			k.order = append(k.order, obj)
		}
	}
	return k
}

// desiredItem is the item of a desired child: created, updated, or left
// alone when another owner's object or an orphan has its name, or while
// the old child is being deleted.
func (c *computation) desiredItem(ctx context.Context, d desiredChild, known *knownChildren) (Item, error) {
	key := ChildKey(d.obj)
	obs, ok := known.observed[key]
	if !ok && !known.foreign[key] && !known.released[key] && !known.unowned[key] && c.in.Existing != nil {
		existing, err := c.in.Existing.Get(ctx, d.gvr, d.obj.GetNamespace(), d.obj.GetName())
		if err != nil {
			return Item{}, fmt.Errorf("can't look up %s: %w", describe(d.obj), err)
		}
		if existing != nil {
			// Not ours and not an orphan, or Candidates would have
			// listed it: someone else controls it.
			known.foreign[key] = true
		}
	}
	var item Item
	switch {
	case !ok && known.foreign[key]:
		// The item says so; the loop records it as ErrResourceExists.
		item = Item{Action: v1alpha1.SyncActionUnchanged, GVR: d.gvr, Desired: d.obj, Reason: ReasonForeign}
	case !ok && known.unowned[key]:
		item = c.unownedItem(d)
	case !ok && known.released[key]:
		item = Item{Action: v1alpha1.SyncActionCreate, GVR: d.gvr, Desired: d.obj, Reason: reasonRetake}
	case !ok:
		item = Item{Action: v1alpha1.SyncActionCreate, GVR: d.gvr, Desired: d.obj, Reason: reasonCreate}
	case obs.GetDeletionTimestamp() != nil:
		// Acting now would race the deletion; once the old child is
		// gone, the next sync creates it anew.
		item = Item{Action: v1alpha1.SyncActionUnchanged, GVR: d.gvr, Desired: d.obj, Observed: obs, Reason: reasonWaitDeletion}
	default:
		item = c.updateItem(ctx, d, obs)
	}
	if rev := c.plan.Rollout.RevisionOf(d.obj); rev != "" {
		item.Revision = rev
		if rev != c.plan.Rollout.Latest && item.Action == v1alpha1.SyncActionUnchanged && item.Reason == "" {
			item.Reason = fmt.Sprintf(reasonOlderRevision, c.plan.Rollout.Message)
		}
	}
	return item, nil
}

// unownedItem is the item of a desired child whose name an object without a
// controller has, which is not adopted: left alone, with a warning, as
// Metacontroller's create of it would fail with AlreadyExists.
func (c *computation) unownedItem(d desiredChild) Item {
	if !c.in.Definition.AdoptsOrphans() {
		c.plan.warn("attachment %s exists without a controller; a DecoratorController adopts no orphan, so it is left alone", describe(d.obj))
		return Item{Action: v1alpha1.SyncActionUnchanged, GVR: d.gvr, Desired: d.obj, Reason: reasonUnownedAttachment}
	}
	c.plan.warn("child %s exists without a controller and does not match the parent's selector; it is left alone", describe(d.obj))
	return Item{Action: v1alpha1.SyncActionUnchanged, GVR: d.gvr, Desired: d.obj, Reason: reasonUnowned}
}

// updateItem is the item of a desired child that exists, by the update
// strategy of its resource. Whether it differs is what kube-apiserver's
// field manager would say of our server-side apply (structured-merge-diff
// over the cluster's schema), not a hand-written value diff: a field the
// hook stopped returning is pruned, a field another manager owns is not
// ours to compare. A child last written by Metacontroller is taken over
// first (Item.Takeover), so that what it set and the hook dropped is
// pruned too.
func (c *computation) updateItem(ctx context.Context, d desiredChild, obs *unstructured.Unstructured) Item {
	item := Item{Action: v1alpha1.SyncActionUnchanged, GVR: d.gvr, Desired: d.obj, Observed: obs}
	manager := c.in.Definition.FieldManager
	observed := obs
	if patch, needed, err := c.in.ownership().TakeoverPatch(obs, manager); err != nil {
		c.plan.warn("can't take %s over from Metacontroller: %v", describe(d.obj), err)
	} else if needed {
		if taken, err := applyJSONPatch(obs, patch); err != nil {
			c.plan.warn("can't take %s over from Metacontroller: %v", describe(d.obj), err)
		} else {
			item.Takeover, observed = patch, taken
			item.Reason = reasonTakeover
		}
	}
	method := c.in.Definition.UpdateMethod(d.gvr)
	action := updateAction(method)
	// A dry run is worth its request only for a child the method would
	// write: OnDelete leaves it alone whatever the server says, so the
	// local merge is enough to say that it differs.
	res := c.compareChild(ctx, d, observed, item.Takeover == nil && action != v1alpha1.SyncActionUnchanged)
	item.Diff = append(res.Lines, res.Ownership...)
	if res.Reason != "" {
		item.Reason = res.Reason
	}
	if !res.Changed {
		return item
	}
	switch item.Action = action; action {
	case v1alpha1.SyncActionUpdate:
		item.Reason = fmt.Sprintf(reasonInPlace, method)
	case v1alpha1.SyncActionRecreate:
		item.Reason = fmt.Sprintf(reasonRecreate, method)
	default:
		item.Reason = reasonOnDelete
	}
	return item
}

// updateAction is what the update method does to a child that differs:
// Unchanged for OnDelete, and for any method this version does not know,
// as leaving a child alone is the safe reading.
func updateAction(method v1alpha1.ChildUpdateMethod) v1alpha1.SyncAction {
	switch method {
	case v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRollingInPlace:
		return v1alpha1.SyncActionUpdate
	case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
		return v1alpha1.SyncActionRecreate
	}
	return v1alpha1.SyncActionUnchanged
}

// ownership is the field-ownership comparison of Input, or one on deduced
// schemas when there is no cluster to ask for its schema.
func (in *Input) ownership() FieldOwnership {
	if in.Ownership != nil {
		return in.Ownership
	}
	return deducedOwnership
}

var deducedOwnership = fieldowner.NewSchemas(nil)

// applyJSONPatch applies an RFC 6902 patch to a copy of obj.
func applyJSONPatch(obj *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if data, err = p.Apply(data); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return out, nil
}

func keySet(objs []*unstructured.Unstructured) map[string]bool {
	s := map[string]bool{}
	for _, obj := range objs {
		if obj != nil {
			s[ChildKey(obj)] = true
		}
	}
	return s
}

// sortItems puts claims first, then orders by apiVersion, kind, namespace
// and name of the desired (else observed) child.
func sortItems(items []Item) {
	rank := func(a v1alpha1.SyncAction) int {
		if a == v1alpha1.SyncActionAdopt || a == v1alpha1.SyncActionOrphan {
			return 0
		}
		return 1
	}
	obj := func(it Item) *unstructured.Unstructured {
		if it.Desired != nil {
			return it.Desired
		}
		return it.Observed
	}
	sort.SliceStable(items, func(i, j int) bool {
		if ri, rj := rank(items[i].Action), rank(items[j].Action); ri != rj {
			return ri < rj
		}
		return objectLess(obj(items[i]), obj(items[j]))
	})
}
