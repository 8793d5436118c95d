package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// The parent's Updated condition, as Metacontroller sets it during rolling
// updates.
const (
	UpdatedCondition         = "Updated"
	ReasonOnLatestRevision   = "OnLatestRevision"
	ReasonRolloutProgressing = "RolloutProgressing"
	ReasonRolloutWaiting     = "RolloutWaiting"
)

// Rollout is what one sync does to a rolling update (children whose
// updateStrategy is RollingRecreate or RollingInPlace): which revision each
// such child follows, the one child that moves to the latest revision, and
// the ControllerRevisions to write for it. The revisions are written before
// any child, so that a crash between the two never loses track of a child.
type Rollout struct {
	// Reason and Message are the parent's Updated condition.
	Reason, Message string
	// Latest is the ControllerRevision of the parent as it is.
	Latest string
	// Next is the child that moves to the latest revision in this sync,
	// as "Kind name"; empty when none does.
	Next string
	// Revisions are the live revisions after this sync, latest first,
	// each with the children that follow it.
	Revisions []*v1alpha1.ControllerRevision

	// Create, Update and Delete are the writes that make the stored
	// revisions the live ones; Update includes adopted orphans (their
	// ownerReferences set to the parent).
	Create, Update, Delete []*v1alpha1.ControllerRevision

	// revisionOf names the revision each rolling child follows, by
	// rollingKey.
	revisionOf map[string]string
}

// Progressing tells whether some child still follows an older revision.
func (r *Rollout) Progressing() bool { return r != nil && r.Reason != ReasonOnLatestRevision }

// RevisionOf is the revision a desired child follows; "" for children of
// other update strategies.
func (r *Rollout) RevisionOf(obj *unstructured.Unstructured) string {
	if r == nil || obj == nil {
		return ""
	}
	return r.revisionOf[rollingKeyOf(obj)]
}

// rollingKey identifies a child in a revision: Metacontroller keys claims
// by API group (not version), kind and name; children live in the parent's
// namespace.
func rollingKey(group, kind, name string) string { return kind + "." + group + "/" + name }

func rollingKeyOf(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	return rollingKey(gvk.Group, gvk.Kind, obj.GetName())
}

// parentRevision is one revision of the parent during a sync: the parent
// as it was, the hook's answer for it, and the revision's (mutable) claims.
type parentRevision struct {
	rev    *v1alpha1.ControllerRevision
	parent *unstructured.Unstructured
	resp   *hookapi.SyncHookResponse
	// desired are the validated desired children by rollingKey.
	desired map[string]desiredChild
	// order are the rollingKeys of the desired children in the order the
	// hook returned them: the order of the rollout.
	order []string
}

func (pr *parentRevision) setAnswer(resp *hookapi.SyncHookResponse, desired []desiredChild) {
	pr.resp = resp
	pr.desired = map[string]desiredChild{}
	for _, d := range desired {
		pr.desired[rollingKeyOf(d.obj)] = d
	}
	for _, obj := range resp.Children {
		if obj == nil {
			continue
		}
		gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
		pr.order = append(pr.order, rollingKey(gv.Group, obj.GetKind(), obj.GetName()))
	}
}

func (pr *parentRevision) add(group, kind, name string) {
	for i := range pr.rev.Children {
		ck := &pr.rev.Children[i]
		if ck.APIGroup == group && ck.Kind == kind {
			for _, n := range ck.Names {
				if n == name {
					return
				}
			}
			ck.Names = append(ck.Names, name)
			return
		}
	}
	pr.rev.Children = append(pr.rev.Children, v1alpha1.ControllerRevisionChildren{APIGroup: group, Kind: kind, Names: []string{name}})
}

func (pr *parentRevision) remove(group, kind, name string) {
	for i := range pr.rev.Children {
		ck := &pr.rev.Children[i]
		if ck.APIGroup != group || ck.Kind != kind {
			continue
		}
		for j, n := range ck.Names {
			if n == name {
				ck.Names = append(ck.Names[:j:j], ck.Names[j+1:]...)
				return
			}
		}
	}
}

func (pr *parentRevision) count() int {
	n := 0
	for _, ck := range pr.rev.Children {
		n += len(ck.Names)
	}
	return n
}

// strategyOf is the update strategy of the children of a group and kind,
// found through the desired or observed children of that kind; nil when
// none is declared.
func (c *computation) strategyOf(gk schema.GroupKind) *v1alpha1.CompositeControllerChildUpdateStrategy {
	gvr, ok := c.kindResources[gk]
	if !ok {
		return nil
	}
	if child, ok := c.in.Definition.ChildOfGroupResource(gvr.GroupResource()); ok {
		return child.Strategy
	}
	return nil
}

func (c *computation) rollingKind(group, kind string) bool {
	s := c.strategyOf(schema.GroupKind{Group: group, Kind: kind})
	return s != nil && definition.IsRolling(s.Method)
}

// rollOut runs Metacontroller's rolling update (its syncRevisions and
// syncRollingUpdate) over the answer the hook gave for the parent as it is:
// it calls the hook once more for each older revision that children still
// follow, moves at most one child to the latest revision, and returns the
// desired children, each as the revision it follows wants it. The plan's
// Response becomes the aggregate answer: the latest status with the
// Updated condition, the smallest resync, finalized only if every revision
// agrees.
func (c *computation) rollOut(ctx context.Context, call func(ctx context.Context, parent *unstructured.Unstructured) (*hookapi.SyncHookResponse, []desiredChild, error), latestDesired []desiredChild) ([]desiredChild, error) {
	set, err := c.readRevisions()
	if err != nil {
		return nil, err
	}
	latest, revisions := set.latest, set.all
	latest.setAnswer(c.plan.Response, latestDesired)
	for _, pr := range revisions[1:] {
		resp, desired, err := call(ctx, pr.parent)
		if err != nil {
			return nil, fmt.Errorf("for ControllerRevision %s: %w", pr.rev.Name, err)
		}
		pr.setAnswer(resp, desired)
	}
	for _, pr := range revisions {
		for _, d := range pr.desired {
			c.kindResources[d.obj.GroupVersionKind().GroupKind()] = d.gvr
		}
	}

	r := &Rollout{Latest: latest.rev.Name, revisionOf: map[string]string{}}
	r.Reason, r.Message, r.Next = c.step(ctx, revisions)
	desired := set.plan(r)
	c.plan.Rollout = r
	c.plan.Response = c.aggregate(latest, revisions, r)

	out := make([]desiredChild, 0, len(desired))
	for _, d := range desired {
		out = append(out, d)
	}
	sortDesired(out)
	return out, nil
}

// revisionSet is the parent's ControllerRevisions, read for one rollout.
type revisionSet struct {
	// latest is the parent as it is; all holds it first, then each older
	// revision with the parent as it was then.
	latest *parentRevision
	all    []*parentRevision
	// owned are the revisions the parent controls; observed all that were
	// read, by name; adopted the names of the orphans it adopts.
	owned    []*v1alpha1.ControllerRevision
	observed map[string]*v1alpha1.ControllerRevision
	adopted  map[string]bool
}

// readRevisions claims the parent's ControllerRevisions and makes, from
// each, the parent as it was at that revision; the parent as it is gets
// the revision whose patch it matches, or a new one.
func (c *computation) readRevisions() (*revisionSet, error) {
	fieldPaths := c.in.Definition.RevisionFieldPaths
	latestPatch, err := revisionPatch(c.in.Parent.Object, fieldPaths)
	if err != nil {
		return nil, err
	}
	latestData, err := canonicalJSON(latestPatch)
	if err != nil {
		return nil, err
	}

	sel, err := RevisionSelector(c.in.Definition, c.in.Parent)
	if err != nil {
		c.plan.warn("ControllerRevisions are not adopted: %v", err)
		sel = nil
	}
	owned, adopt := claimRevisions(c.in.Parent, sel, c.in.Revisions)
	set := &revisionSet{owned: owned, observed: map[string]*v1alpha1.ControllerRevision{}, adopted: map[string]bool{}}
	for _, rev := range adopt {
		set.adopted[rev.Name] = true
	}

	latest := &parentRevision{parent: c.in.Parent}
	set.latest, set.all = latest, []*parentRevision{latest}
	for _, rev := range append(append([]*v1alpha1.ControllerRevision{}, owned...), adopt...) {
		set.observed[rev.Name] = rev
		var patch map[string]interface{}
		if err := json.Unmarshal(rev.ParentPatch.Raw, &patch); err != nil || patch == nil {
			c.plan.warn("ControllerRevision %s has no readable parentPatch; it is ignored: %v", rev.Name, err)
			continue
		}
		data, err := canonicalJSON(patch)
		if err != nil {
			return nil, err
		}
		if string(data) == string(latestData) && latest.rev == nil {
			latest.rev = rev.DeepCopy()
			continue
		}
		pr := &parentRevision{parent: c.in.Parent.DeepCopy(), rev: rev.DeepCopy()}
		if err := applyRevisionPatch(pr.parent.Object, patch, fieldPaths); err != nil {
			return nil, fmt.Errorf("ControllerRevision %s: %w", rev.Name, err)
		}
		set.all = append(set.all, pr)
	}
	if latest.rev == nil {
		if latest.rev, err = newRevision(c.in.Definition, c.in.Parent, latestData); err != nil {
			return nil, err
		}
	}
	for _, pr := range set.all {
		if set.adopted[pr.rev.Name] {
			pr.rev.OwnerReferences = append(pr.rev.OwnerReferences, ControllerRef(c.in.Parent))
		}
	}
	return set, nil
}

// plan fills r with the revisions to keep, create, update and delete, and
// returns the desired children by key, each as the revision it follows
// wants it. Revisions no child follows any more go: the user keeps old
// configurations in source control, not here (Metacontroller's rule).
func (set *revisionSet) plan(r *Rollout) map[string]desiredChild {
	latest := set.latest
	live := []*parentRevision{latest}
	for _, pr := range set.all[1:] {
		if pr.count() > 0 {
			live = append(live, pr)
		}
	}
	desired := map[string]desiredChild{}
	for k, d := range latest.desired {
		desired[k] = d
	}
	for _, pr := range live {
		r.Revisions = append(r.Revisions, pr.rev)
		for _, ck := range pr.rev.Children {
			for _, n := range ck.Names {
				key := rollingKey(ck.APIGroup, ck.Kind, n)
				r.revisionOf[key] = pr.rev.Name
				if pr == latest {
					continue
				}
				if _, ok := desired[key]; ok {
					if old, ok := pr.desired[key]; ok {
						desired[key] = old
					}
				}
			}
		}
	}
	liveNames := map[string]bool{}
	for _, pr := range live {
		liveNames[pr.rev.Name] = true
		old, ok := set.observed[pr.rev.Name]
		switch {
		case !ok:
			r.Create = append(r.Create, pr.rev)
		case set.adopted[pr.rev.Name] || !revisionChildrenEqual(old.Children, pr.rev.Children):
			r.Update = append(r.Update, pr.rev)
		}
	}
	for _, rev := range set.owned {
		if !liveNames[rev.Name] {
			r.Delete = append(r.Delete, rev)
		}
	}
	return desired
}

// step is Metacontroller's syncRollingUpdate: it settles which revision
// claims which child, moves the children that are new or already match to
// the latest revision, and then at most one other, in the order of the
// latest answer, if every child already on the latest revision passes its
// checks. It returns the Updated condition and the child that moved.
func (c *computation) step(ctx context.Context, revisions []*parentRevision) (reason, message, next string) {
	latest := revisions[0]
	claimed := c.settleClaims(revisions)

	for _, key := range latest.order {
		d, ok := latest.desired[key]
		if !ok {
			continue
		}
		gvk := d.obj.GroupVersionKind()
		if !c.rollingKind(gvk.Group, gvk.Kind) {
			continue
		}
		pr, found := claimed[key]
		switch {
		case !found:
			latest.add(gvk.Group, gvk.Kind, d.obj.GetName())
			claimed[key] = latest
		case pr == latest:
		default:
			// Moving a child that already matches changes nothing, and
			// keeps the sync from being a no-op that nothing would
			// follow up. The local merge alone is asked: a dry run of
			// every child an older revision holds, on every sync, cost
			// O(N) requests a sync. One that only the API server finds
			// matching moves for free when the rollout reaches it.
			if obs := c.observedChild(key); obs != nil && !c.differs(ctx, d, obs, false) {
				pr.remove(gvk.Group, gvk.Kind, d.obj.GetName())
				latest.add(gvk.Group, gvk.Kind, d.obj.GetName())
				claimed[key] = latest
			}
		}
	}

	for _, key := range latest.order {
		d, ok := latest.desired[key]
		if !ok {
			continue
		}
		gvk := d.obj.GroupVersionKind()
		if !c.rollingKind(gvk.Group, gvk.Kind) || claimed[key] == latest {
			continue
		}
		if err := c.latestHealthy(ctx, latest); err != nil {
			return ReasonRolloutWaiting, err.Error(), ""
		}
		for _, pr := range revisions[1:] {
			pr.remove(gvk.Group, gvk.Kind, d.obj.GetName())
		}
		latest.add(gvk.Group, gvk.Kind, d.obj.GetName())
		claimed[key] = latest
		if obs := c.observedChild(key); obs != nil && !c.differs(ctx, d, obs, true) {
			// It matches once defaulting and admission have had their
			// say: that move changes nothing either, and the next child
			// moves in its place. The dry run that tells is the one its
			// update would cost anyway.
			continue
		}
		next = gvk.Kind + " " + d.obj.GetName()
		return ReasonRolloutProgressing, "updating " + next, next
	}
	return ReasonOnLatestRevision, "latest ControllerRevision: " + latest.rev.Name, ""
}

// settleClaims drops the claims of kinds that no longer roll and of
// children the latest answer no longer wants (they are deleted now), and
// gives a child claimed twice to the first revision, the latest.
func (c *computation) settleClaims(revisions []*parentRevision) map[string]*parentRevision {
	latest := revisions[0]
	claimed := map[string]*parentRevision{}
	for _, pr := range revisions {
		var kept []v1alpha1.ControllerRevisionChildren
		for _, ck := range pr.rev.Children {
			if !c.rollingKind(ck.APIGroup, ck.Kind) {
				continue
			}
			var names []string
			for _, n := range ck.Names {
				key := rollingKey(ck.APIGroup, ck.Kind, n)
				if _, wanted := latest.desired[key]; !wanted {
					continue
				}
				if _, dup := claimed[key]; dup {
					continue
				}
				claimed[key] = pr
				names = append(names, n)
			}
			if len(names) > 0 {
				kept = append(kept, v1alpha1.ControllerRevisionChildren{APIGroup: ck.APIGroup, Kind: ck.Kind, Names: names})
			}
		}
		pr.rev.Children = kept
	}
	return claimed
}

// latestHealthy is nil when every rolling child on the latest revision is
// observed, up to date, has (for RollingInPlace) observed its generation,
// and passes its statusChecks; otherwise it says which child and why.
func (c *computation) latestHealthy(ctx context.Context, latest *parentRevision) error {
	for _, ck := range latest.rev.Children {
		strategy := c.strategyOf(schema.GroupKind{Group: ck.APIGroup, Kind: ck.Kind})
		if strategy == nil || !definition.IsRolling(strategy.Method) {
			continue
		}
		for _, name := range ck.Names {
			key := rollingKey(ck.APIGroup, ck.Kind, name)
			obs := c.observedChild(key)
			if obs == nil {
				return fmt.Errorf("waiting for %s %s: not observed yet", ck.Kind, name)
			}
			if obs.GetDeletionTimestamp() != nil {
				// A recreated child's old self, on its way out.
				return fmt.Errorf("waiting for %s %s: being deleted", ck.Kind, name)
			}
			if d, ok := latest.desired[key]; ok && c.differs(ctx, d, obs, true) {
				return fmt.Errorf("waiting for %s %s: not updated yet", ck.Kind, name)
			}
			if strategy.Method == v1alpha1.ChildUpdateRollingInPlace {
				// Not every controller writes observedGeneration; those
				// that do must have seen the update.
				if og, found, _ := unstructured.NestedInt64(obs.Object, "status", "observedGeneration"); found && og > 0 && og < obs.GetGeneration() {
					return fmt.Errorf("waiting for %s %s: status.observedGeneration %d has not reached generation %d", ck.Kind, name, og, obs.GetGeneration())
				}
			}
			if err := statusChecksPass(strategy.StatusChecks, obs); err != nil {
				return fmt.Errorf("waiting for %s %s: %v", ck.Kind, name, err)
			}
		}
	}
	return nil
}

// statusChecksPass checks the child's status conditions against the
// strategy's statusChecks.
func statusChecksPass(checks v1alpha1.ChildUpdateStatusChecks, child *unstructured.Unstructured) error {
	for _, check := range checks.Conditions {
		cond := StatusCondition(child, check.Type)
		if cond == nil {
			return fmt.Errorf("condition %q is missing", check.Type)
		}
		if check.Status != nil {
			if s, _ := cond["status"].(string); s != *check.Status {
				return fmt.Errorf("condition %q has status %q, want %q", check.Type, s, *check.Status)
			}
		}
		if check.Reason != nil {
			if r, _ := cond["reason"].(string); r != *check.Reason {
				return fmt.Errorf("condition %q has reason %q, want %q", check.Type, r, *check.Reason)
			}
		}
	}
	return nil
}

// StatusCondition is the object's status condition of that type, as
// Metacontroller reads conditions (status.conditions[].type); nil when it
// has none.
func StatusCondition(obj *unstructured.Unstructured, condType string) map[string]interface{} {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]interface{}); ok && m["type"] == condType {
			return m
		}
	}
	return nil
}

// observedChild is the parent's child with this rollingKey, owned or about
// to be adopted; nil when there is none.
func (c *computation) observedChild(key string) *unstructured.Unstructured {
	if c.observedByKey == nil {
		c.observedByKey = map[string]*unstructured.Unstructured{}
		for _, list := range [][]*unstructured.Unstructured{c.in.Children.Owned, c.in.Children.Adopt} {
			for _, obj := range list {
				if obj != nil {
					if _, dup := c.observedByKey[rollingKeyOf(obj)]; !dup {
						c.observedByKey[rollingKeyOf(obj)] = obj
					}
				}
			}
		}
	}
	return c.observedByKey[key]
}

// differs tells whether applying d would change obs, as updateItem decides
// when askServer, by the local merge alone otherwise. A child the API
// server holds a newer version of than the one observed (a Pod just
// recreated, whose old self is still in the cache) is not known to match:
// it counts as differing until the sync that observes the newer version,
// so that a rollout never moves on, or counts a child as updated, on the
// strength of its old self.
func (c *computation) differs(ctx context.Context, d desiredChild, obs *unstructured.Unstructured, askServer bool) bool {
	r := c.compareChild(ctx, d, obs, askServer)
	return r.Changed || r.Reason == reasonMovedOn
}

// aggregate is the answer of all revisions as one: the latest's status with
// the Updated condition, the smallest positive resync, finalized when every
// revision says so.
func (c *computation) aggregate(latest *parentRevision, revisions []*parentRevision, r *Rollout) *hookapi.SyncHookResponse {
	out := *latest.resp
	status := map[string]interface{}{}
	for k, v := range latest.resp.Status {
		status[k] = v
	}
	setCondition(status, map[string]interface{}{"type": UpdatedCondition, "status": conditionStatus(r.Reason), "reason": r.Reason, "message": r.Message})
	out.Status = status
	out.Finalized = true
	for _, pr := range revisions {
		if s := pr.resp.ResyncAfterSeconds; s > 0 && (out.ResyncAfterSeconds == 0 || s < out.ResyncAfterSeconds) {
			out.ResyncAfterSeconds = s
		}
		if !pr.resp.Finalized {
			out.Finalized = false
		}
	}
	return &out
}

func conditionStatus(reason string) string {
	if reason == ReasonOnLatestRevision {
		return "True"
	}
	return "False"
}

// setCondition replaces the status condition of the same type, or adds it.
func setCondition(status map[string]interface{}, cond map[string]interface{}) {
	conds, _ := status["conditions"].([]interface{})
	out := make([]interface{}, 0, len(conds)+1)
	replaced := false
	for _, existing := range conds {
		if m, ok := existing.(map[string]interface{}); ok && m["type"] == cond["type"] {
			if !replaced {
				out = append(out, cond)
				replaced = true
			}
			continue
		}
		out = append(out, existing)
	}
	if !replaced {
		out = append(out, cond)
	}
	status["conditions"] = out
}

func revisionChildrenEqual(a, b []v1alpha1.ControllerRevisionChildren) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].APIGroup != b[i].APIGroup || a[i].Kind != b[i].Kind || len(a[i].Names) != len(b[i].Names) {
			return false
		}
		for j := range a[i].Names {
			if a[i].Names[j] != b[i].Names[j] {
				return false
			}
		}
	}
	return true
}
