// Package reconcile runs one whole sync of one parent, as Metacontroller's
// parent controller does: the finalizer, the claim of children (adoption
// re-checked against the live parent), the hooks, the plan, its execution,
// the parent's status and Events. The controller loop and a live /sync call
// the same Sync, so they cannot drift apart; a dry run stops after the plan.
// It reads the controller only through its compiled definition.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// finalizingResync is how soon a parent whose finalize hook did not finalize
// it yet is synced again when the hook does not say.
const finalizingResync = 5 * time.Second

// Controller is one controller, compiled, with its hooks: ready to sync
// its parents.
type Controller struct {
	Def   *definition.Definition
	Hooks engine.Hooks
	// ParentWithoutStatus says that the parent resource has no status
	// subresource; only a DecoratorController runs for such a resource.
	ParentWithoutStatus bool
	// FinalizeGrace is how long, counted from a parent's deletion, the
	// children it still has once its finalize hook answered finalized may
	// keep the finalizer on; zero means DefaultFinalizeGrace.
	FinalizeGrace time.Duration
}

// DefaultFinalizeGrace bounds how long a finalized parent waits for its
// children's deletes before its finalizer goes anyway.
const DefaultFinalizeGrace = 2 * time.Minute

// Env is where a sync reads and writes.
type Env struct {
	// Client writes children, the parent's status and finalizer.
	Client dynamic.Interface
	// Metadata applies children and reads back only their metadata.
	Metadata metadata.Interface
	// Resolver maps kinds to resources.
	Resolver definition.KindResolver
	// Children lists the objects of the child resources that may be the
	// parent's children.
	Children engine.ObjectLister
	// Index, when set, finds them instead without reading the parent's
	// whole namespace (the loop's informers index objects by controller);
	// it also tells the engine which objects that are not the parent's
	// share a desired child's name.
	Index engine.ChildIndex
	// Related lists the objects customize rules select.
	Related engine.ObjectLister
	// Ownership compares desired children with what the controller
	// applied; nil uses schemas deduced from the objects.
	Ownership engine.FieldOwnership
	// Recorder records Events on the parent; nil records none.
	Recorder record.EventRecorder
	// ChildEvents, when set, budgets the Normal Events that say what a sync
	// did to children (ChildCreated, ChildUpdated, ...): past it they are
	// not recorded. Warnings are never budgeted. nil records every one.
	ChildEvents EventBudget
	// Revisions lists the ControllerRevisions of rolling updates; nil
	// when there are none to read (a preview without a cluster).
	Revisions RevisionLister
}

// Options change what one Sync does.
type Options struct {
	// DryRun plans and changes nothing: no finalizer, adoption, child,
	// status or Event.
	DryRun bool
	// Claimed are the parent's children as given inline (a preview);
	// nil claims them from Env.Children.
	Claimed *engine.Claimed
	// StatusAfterChildEchoes: the caller syncs the parent again once it
	// observes the children this sync writes, as they were written (the
	// loop does), so a sync that writes children leaves the parent's status
	// to that next sync, whose hook sees them. Written now, the status would
	// be replaced at once, at the cost of a write and of its echo.
	StatusAfterChildEchoes bool
	// Allow, when set, is asked before anything of the plan is carried
	// out; an error stops the sync there. A live /sync checks the caller's
	// own rights with it.
	Allow func(ctx context.Context, plan *engine.Plan) error
	// Encodings keep the observed children's encoding for the parent's
	// next sync (engine.Input.Encodings); the loop sets them.
	Encodings *hookapi.Encodings
}

// Result is what one Sync found and did.
type Result struct {
	// Parent is the parent as last read or written.
	Parent *unstructured.Unstructured
	// Skipped says why nothing was synced; empty when the hooks ran.
	Skipped string
	// Plan is the engine's plan; nil when skipped.
	Plan *engine.Plan
	// Warnings are problems that did not stop the sync: the plan's and
	// the claim's.
	Warnings []string
	// Done is what was done to children, failures included.
	Done []apply.Done
	// FinalizerAdded and FinalizerRemoved say what happened to the
	// controller's finalizer on the parent.
	FinalizerAdded, FinalizerRemoved bool
	// StatusWritten says whether the parent's status was written.
	StatusWritten bool
	// StatusDeferred: the status was left to the next sync
	// (Options.StatusAfterChildEchoes).
	StatusDeferred bool
	// ParentWrites are the sync's writes to the parent that stored
	// something (finalizer, status, decoration), in order: the loop tells
	// their watch events, the echoes of its own writes, from others'.
	ParentWrites []ParentWrite
	// RequeueAfter is when the parent wants its next sync; 0 for only on
	// change.
	RequeueAfter time.Duration
}

// ParentWrite is one write of a sync to its parent.
type ParentWrite struct {
	// ResourceVersion is the one the write stored.
	ResourceVersion string
	// Answer: the write stored the hook's answer (its status, a
	// decorator's labels and annotations), which a hook may read on its
	// next call; not the controller's finalizer.
	Answer bool
}

// Sync syncs one parent. It returns an error when the hooks failed or a
// write failed; a failed hook changes nothing.
func (c *Controller) Sync(ctx context.Context, env Env, parent *unstructured.Unstructured, opts Options) (*Result, error) {
	res := &Result{Parent: parent}
	parent, err := c.admit(ctx, env, parent, opts, res)
	if err != nil || parent == nil {
		return res, err
	}
	plan, err := c.computePlan(ctx, env, parent, opts, res)
	if err != nil || opts.DryRun {
		return res, err
	}
	if opts.Allow != nil {
		if err := opts.Allow(ctx, plan); err != nil {
			return res, err
		}
	}
	return res, c.carryOut(ctx, env, parent, plan, opts, res)
}

// admit tells whether the controller syncs parent and, in a live sync,
// first puts its finalizer on or takes it off. It returns the parent to
// sync, nil when there is none: res.Skipped says why, or the parent went
// with its finalizer.
func (c *Controller) admit(ctx context.Context, env Env, parent *unstructured.Unstructured, opts Options, res *Result) (*unstructured.Unstructured, error) {
	if !c.ours(parent) {
		res.Skipped = c.notSelected()
		return nil, nil
	}
	if opts.DryRun {
		if c.Hooks.HasFinalize() && parent.GetDeletionTimestamp() == nil && !definition.HasFinalizer(parent, c.Def.Finalizer) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("a live sync would first add the finalizer %s: the controller has a finalize hook", c.Def.Finalizer))
		}
		return parent, nil
	}
	parent, err := c.syncFinalizer(ctx, env, parent, res)
	if err != nil || parent == nil {
		return nil, err
	}
	res.Parent = parent
	if !c.ours(parent) {
		res.Skipped = c.notSelected()
		return nil, nil
	}
	return parent, nil
}

// notSelected says why a parent the controller does not handle is skipped,
// naming the fields of the controller's kind that select its parents.
func (c *Controller) notSelected() string {
	if c.Def.Kind == definition.KindDecorator {
		return "the object does not match the labelSelector and annotationSelector of spec.resources"
	}
	return "the parent does not match spec.parentResource.labelSelector"
}

// computePlan claims the parent's children, unless given, and computes the
// plan, recording its warnings and when the parent wants its next sync.
func (c *Controller) computePlan(ctx context.Context, env Env, parent *unstructured.Unstructured, opts Options, res *Result) (*engine.Plan, error) {
	claimed := opts.Claimed
	if claimed == nil {
		var err error
		if claimed, err = c.claim(ctx, env, parent, opts.DryRun, res); err != nil {
			return nil, err
		}
	}
	revisions, err := c.revisions(ctx, env, parent, opts)
	if err != nil {
		return nil, err
	}
	plan, err := engine.Compute(ctx, engine.Input{
		Revisions:  revisions,
		Definition: c.Def,
		Parent:     parent,
		Children:   *claimed,
		Hooks:      c.Hooks,
		Related:    env.Related,
		Resolver:   env.Resolver,
		Ownership:  env.Ownership,
		DryRun:     c.dryRunner(env, opts),
		Existing:   c.existing(env, opts),
		Encodings:  opts.Encodings,
	})
	if err != nil {
		c.computeFailedEvent(env, opts, parent, err)
		return nil, err
	}
	res.Plan = plan
	res.Warnings = append(res.Warnings, plan.Warnings...)
	c.planEvents(env, opts, parent, plan)
	res.RequeueAfter = c.requeueAfter(plan)
	return plan, nil
}

// dryRunner asks the target cluster, through the sync's client, about the
// children the engine finds changed; nil without a cluster, and nil for a
// preview (opts.DryRun), which goes by the local merge: one preview costs
// about one hook call, and spec.serverDryRun asks the cluster about each
// desired child itself.
func (c *Controller) dryRunner(env Env, opts Options) engine.DryRunner {
	if env.Client == nil || opts.DryRun {
		return nil
	}
	return apply.DryRunner{Client: env.Client, Controller: c.Def.Name}
}

// carryOut executes the plan, then removes the finalizer when the finalize
// hook finalized the parent, and writes the hook's answer for the parent
// unless that is left to the next sync.
func (c *Controller) carryOut(ctx context.Context, env Env, parent *unstructured.Unstructured, plan *engine.Plan, opts Options, res *Result) error {
	done, applyErr := apply.Execute(ctx, env.Client, env.Metadata, c.Def.Name, parent, plan)
	res.Done = done
	c.doneEvents(env, opts, parent, done, applyErr)
	var revisionsErr *apply.RevisionsError
	if errors.As(applyErr, &revisionsErr) {
		// No child moved: the status the engine computed (Updated:
		// RolloutProgressing "updating ...") would claim a step that did
		// not happen. Metacontroller stops here too, before the status.
		return applyErr
	}
	if applyErr == nil {
		c.rolloutEvent(env, opts, parent, plan.Rollout)
	}
	if c.finalizerGoes(env, opts, parent, plan, applyErr) {
		updated, err := c.removeFinalizer(ctx, env, parent, res)
		if err != nil {
			return err
		}
		if updated == nil {
			// Gone with its last finalizer.
			return applyErr
		}
		parent = updated
		res.Parent = parent
	}
	if c.statusDeferred(opts, plan, done, applyErr) {
		res.StatusDeferred = true
		return nil
	}
	if err := c.writeAnswer(ctx, env, parent, plan, res); err != nil {
		applyErr = errors.Join(applyErr, err)
	}
	return applyErr
}

// statusDeferred tells whether the parent's status is left to the sync
// the echoes of this sync's child writes bring
// (Options.StatusAfterChildEchoes): only when every write succeeded, the
// parent is not finalizing and nothing but its status is to be written.
func (c *Controller) statusDeferred(opts Options, plan *engine.Plan, done []apply.Done, applyErr error) bool {
	return opts.StatusAfterChildEchoes && applyErr == nil && !plan.Finalizing && plan.Decoration == nil && wroteChildren(done)
}

// writeAnswer writes what the hook answered for the parent and records the
// writes in res. As Metacontroller: the hook's status, finalize hook's
// included, is written whenever it differs; a parent gone or changed since
// it was read is synced again by its own event, so that is no error.
func (c *Controller) writeAnswer(ctx context.Context, env Env, parent *unstructured.Unstructured, plan *engine.Plan, res *Result) error {
	written, err := c.writeParent(ctx, env, parent, plan)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		klog.FromContext(ctx).V(4).Info("Parent changed or went away before its status was written", "err", err)
		err = nil
	}
	res.StatusWritten = len(written) > 0
	for _, w := range written {
		res.ParentWrites = append(res.ParentWrites, ParentWrite{ResourceVersion: w.GetResourceVersion(), Answer: true})
	}
	return err
}

// wroteChildren tells whether a child was created, changed or deleted.
func wroteChildren(done []apply.Done) bool {
	for _, d := range done {
		if d.Wrote() {
			return true
		}
	}
	return false
}

// revisions are the ControllerRevisions a rolling update decides from: a
// live parent's, when the controller has a rolling update strategy.
func (c *Controller) revisions(ctx context.Context, env Env, parent *unstructured.Unstructured, opts Options) ([]*v1alpha1.ControllerRevision, error) {
	if env.Revisions == nil || opts.Claimed != nil || parent.GetUID() == "" || !c.Def.Rolling {
		return nil, nil
	}
	return env.Revisions.Revisions(ctx, parent.GetNamespace(), c.Def.Parent.GVR)
}

// existing is the index for desired children's names when the children
// came from one: Candidates then held only the parent's and the orphans.
func (c *Controller) existing(env Env, opts Options) engine.ChildIndex {
	if opts.Claimed != nil {
		return nil
	}
	return env.Index
}

// ours tells whether the controller syncs parent: it matches the label
// selector, or it carries the finalizer, which only the finalize hook may
// take off.
func (c *Controller) ours(parent *unstructured.Unstructured) bool { return c.Def.Handles(parent) }

// claim finds the parent's children among the candidates and sorts them
// the ControllerRef way. Before adopting orphans it reads the parent again
// from the cluster: a parent deleted or replaced since it was read must not
// adopt anything.
func (c *Controller) claim(ctx context.Context, env Env, parent *unstructured.Unstructured, dryRun bool, res *Result) (*engine.Claimed, error) {
	selector, err := engine.ParentSelector(c.Def, parent)
	if err != nil {
		return nil, err
	}
	var candidates []*unstructured.Unstructured
	for _, gvr := range c.Def.ChildGVRs() {
		var objs []*unstructured.Unstructured
		var err error
		if env.Index != nil {
			objs, err = env.Index.Candidates(ctx, gvr, parent.GetNamespace(), parent.GetUID())
		} else {
			objs, err = env.Children.List(ctx, gvr, parent.GetNamespace(), labels.Everything())
		}
		if err != nil {
			return nil, fmt.Errorf("can't list %s: %w", gvr.GroupResource(), err)
		}
		candidates = append(candidates, objs...)
	}
	candidates = engine.OwnedCandidates(c.Def, candidates)
	canAdopt := parent.GetDeletionTimestamp() == nil && c.Def.AdoptsOrphans()
	claimed := engine.Claim(parent, selector, candidates, canAdopt)
	if len(claimed.Adopt) > 0 && !dryRun {
		// Adopt only for the parent as it is now, as Kubernetes'
		// controllers recheck before adopting: a parent deleted or
		// recreated meanwhile adopts nothing. A read that fails says
		// nothing either way: the sync fails and is retried with backoff.
		fresh, err := env.Client.Resource(c.Def.Parent.GVR).Namespace(parent.GetNamespace()).Get(ctx, parent.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			claimed = engine.Claim(parent, selector, candidates, false)
		case err != nil:
			return nil, fmt.Errorf("can't read %s %s again before adopting its children: %w", parent.GetKind(), parent.GetName(), err)
		case fresh.GetUID() != parent.GetUID() || fresh.GetDeletionTimestamp() != nil:
			claimed = engine.Claim(parent, selector, candidates, false)
		}
	}
	for _, foreign := range claimed.Foreign {
		msg := fmt.Sprintf("%s %s matches the selector but is controlled by %s; it is left alone", foreign.GetKind(), foreign.GetName(), describeController(foreign))
		res.Warnings = append(res.Warnings, msg)
		c.event(env, Options{DryRun: dryRun}, parent, corev1.EventTypeWarning, "ErrResourceExists", msg)
	}
	return &claimed, nil
}

// requeueAfter is when the parent is next synced without a change: the
// smaller of the hook's resyncAfterSeconds and the controller's
// resyncPeriodSeconds (which Metacontroller raises to at least a second, so
// 0 means every second), or sooner when the plan asks (engine.Plan.Recheck).
func (c *Controller) requeueAfter(plan *engine.Plan) time.Duration {
	var after time.Duration
	if s := plan.Response.ResyncAfterSeconds; s > 0 {
		after = time.Duration(s * float64(time.Second))
	}
	if period := c.Def.ResyncPeriod; period > 0 {
		if after == 0 || period < after {
			after = period
		}
	}
	if after == 0 && plan.Finalizing && !plan.Response.Finalized {
		after = finalizingResync
	}
	if plan.Recheck > 0 && (after == 0 || plan.Recheck < after) {
		after = plan.Recheck
	}
	return after
}
