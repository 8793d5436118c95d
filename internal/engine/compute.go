package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// Hooks are the hooks Compute may call for a parent.
type Hooks struct {
	// Sync computes the parent's status and desired children. Required
	// for a CompositeController.
	Sync SyncHook
	// Finalize is called instead of Sync while the parent is being deleted.
	// Optional; without it a parent being deleted is not synced at all.
	Finalize SyncHook
	// Decorator are a DecoratorController's sync and finalize hooks, which
	// take a decorator's request; they stand for Sync and Finalize, which
	// a DecoratorController leaves nil.
	Decorator DecoratorHooks
	// Customize selects related objects; called only when the controller
	// declares a customize hook. Optional.
	Customize hookapi.CustomizeHook
	// Patches are spec.hooks.patches, run over the desired children the
	// sync or finalize hook returned. Required when the controller
	// declares patches.
	Patches *patches.Pipeline
}

// HasFinalize tells whether the controller's finalize hook is available,
// of either kind.
func (h Hooks) HasFinalize() bool { return h.Finalize != nil || h.Decorator.Finalize != nil }

// hasSync tells whether the sync hook of a controller of kind is there.
func (h Hooks) hasSync(kind string) bool {
	if kind == definition.KindDecorator {
		return h.Decorator.Sync != nil
	}
	return h.Sync != nil
}

// Input is everything Compute needs for one parent. Compute reads it and
// never modifies it: the objects may come straight from an informer cache.
type Input struct {
	// Definition is the controller, compiled.
	Definition *definition.Definition
	Parent     *unstructured.Unstructured
	// Children is what Claim returned, or, for inline children, all of them
	// in Owned.
	Children Claimed
	Hooks    Hooks
	// Related lists the objects the customize hook's rules select.
	Related  ObjectLister
	Resolver definition.KindResolver
	// Existing, when set, looks up objects that have a desired child's
	// name but are not among Children (which then hold only what the
	// parent controls and the orphans): controlled by someone else, they
	// are left alone. Without it, Children must hold every object of the
	// child resources in the parent's namespace.
	Existing ChildIndex
	// Revisions are the ControllerRevisions in the parent's namespace that
	// its revision selector may match (Metacontroller's labels), for the
	// rolling update of children with a Rolling* update strategy; those the
	// parent does not control, or may not adopt, are ignored. Nil for a
	// parent without revisions yet, or a preview without a cluster.
	Revisions []*v1alpha1.ControllerRevision
	// Ownership decides whether applying a desired child changes it, with
	// the target cluster's schemas; nil compares with schemas deduced from
	// the objects.
	Ownership FieldOwnership
	// DryRun, when set, asks the target cluster about a child that
	// Ownership finds changed: only the API server knows what its
	// defaulting and admission make of an apply, which the local merge
	// does not see. Nil (no cluster) goes by Ownership alone.
	DryRun DryRunner
	// Encodings, when set, keep the encoding of the observed children
	// the hook request sends, for the parent's next sync to reuse (the
	// loop's EncodingCache); nil encodes them on every call.
	Encodings *hookapi.Encodings
}

// DryRunner server-side applies a desired child, as the apply of a plan
// does (ownerReferences included), with dryRun=All: it answers what the
// API server would store, defaulting and admission included, and stores
// nothing.
type DryRunner interface {
	DryRunApply(ctx context.Context, gvr schema.GroupVersionResource, child *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// Item is the plan for one child.
type Item struct {
	Action v1alpha1.SyncAction
	// GVR is the child's resource.
	GVR schema.GroupVersionResource
	// Desired is set for Create, Update, Recreate and, when the hook
	// returned the child, Unchanged. It has no ownerReferences: the apply
	// code sets ControllerRef itself.
	Desired *unstructured.Unstructured
	// Observed is set for Update, Recreate, Delete, Unchanged (when the
	// parent has such a child), Adopt and Orphan. It is the caller's object,
	// not a copy.
	Observed *unstructured.Unstructured
	// Reason explains the action, e.g. why a changed child is not updated.
	Reason string
	// Diff lists what applying Desired changes on Observed, one field a
	// line; a removed field's line starts with "- ".
	Diff []string
	// Revision is the ControllerRevision whose desired state the child
	// follows, for children of a rolling update strategy.
	Revision string
	// Takeover, when set, is a JSON patch (RFC 6902) to send before the
	// apply: it moves the fields Metacontroller's field manager owns to
	// this controller's, so that the apply prunes what the hook dropped.
	Takeover []byte
}

// FieldOwnership tells what server-side applying a desired child would
// change; *fieldowner.Schemas implements it.
type FieldOwnership interface {
	Compare(observed, desired *unstructured.Unstructured, manager string) (fieldowner.Result, error)
	CompareDryRun(observed, desired, stored *unstructured.Unstructured, manager string) (fieldowner.Result, error)
	TakeoverPatch(observed *unstructured.Unstructured, manager string) ([]byte, bool, error)
}

// SyncHook is a sync or finalize hook as the engine calls it: it answers
// and says the exact request body it sent, which a preview shows as is
// (*hooks.Webhook); nil when it sent none.
type SyncHook interface {
	SyncSent(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error)
}

// InProcess makes a hook that runs in this process (Go code, tests), and so
// sends no body, a SyncHook; nil stays nil.
func InProcess(h hookapi.SyncHook) SyncHook {
	if h == nil {
		return nil
	}
	return inProcess{h}
}

type inProcess struct{ hookapi.SyncHook }

func (h inProcess) SyncSent(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error) {
	// The request holds the caller's objects, which may be an informer
	// cache's: Go code gets copies, which it may modify.
	resp, err := h.Sync(ctx, req.DeepCopy())
	if err != nil || resp == nil {
		return resp, nil, err
	}
	answer := *resp
	answer.Status = asDecodedJSON(resp.Status)
	answer.Children = asDecodedObjects(resp.Children)
	return &answer, nil, nil
}

// asDecodedJSON gives a JSON object an in-process hook answered the shape
// a webhook's has once decoded (internal/hooks): numbers as int64 or float64,
// maps and slices of interface{}. Go code may answer with an int, a
// []string or a struct, which the rest of the loop can't deep-copy
// (runtime.DeepCopyJSON panics on them) and a webhook never sends. What
// JSON can't carry (NaN, a channel) is left as it is, for the answer's
// validation to refuse with its own message.
func asDecodedJSON(obj map[string]interface{}) map[string]interface{} {
	if obj == nil {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return obj
	}
	var decoded map[string]interface{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &decoded); err != nil {
		return obj
	}
	return decoded
}

// asDecodedObjects is asDecodedJSON of each object, in new Unstructureds.
func asDecodedObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if objs == nil {
		return nil
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		if obj != nil {
			obj = &unstructured.Unstructured{Object: asDecodedJSON(obj.Object)}
		}
		out[i] = obj
	}
	return out
}

// Plan is the outcome of one sync of one parent: what the hooks were asked
// and answered, and what to do to each child.
type Plan struct {
	// HookRequest is exactly what was sent to the sync or finalize hook;
	// nil when no hook was called. It holds the observed objects of Input,
	// not copies: read it, don't modify it. An in-process hook gets a deep
	// copy of it, which it may modify.
	HookRequest *hookapi.SyncHookRequest
	// HookRequestJSON is HookRequest as it was sent, when the hook says
	// (a webhook does): the same bytes json.Marshal makes of HookRequest,
	// which a preview shows without encoding them again. Nil otherwise.
	HookRequestJSON []byte
	// Response is the hook's answer as it gave it; nil when no hook was
	// called, in which case the parent's status is not to be touched.
	// During a rolling update it is the answer of every revision as one:
	// the latest status with the Updated condition (see Rollout).
	Response *hookapi.SyncHookResponse
	// Desired are the validated desired children, namespace defaulted,
	// system metadata removed, sorted by apiVersion, kind, namespace, name.
	Desired []*unstructured.Unstructured
	// Items are in a deterministic order: Adopt and Orphan first (claims
	// settle ownership before anything else runs), then by apiVersion,
	// kind, namespace and name.
	Items []Item
	// Finalizing is true when the finalize hook was called: the parent is
	// being deleted or stopped matching spec.parentResource.labelSelector.
	// Response.Finalized says whether it may go.
	Finalizing bool
	// Rollout is the rolling update of children with a Rolling* update
	// strategy; nil when the controller has none.
	Rollout *Rollout
	// Warnings are problems that did not stop the sync.
	Warnings []string
	// Recheck, when positive, is how soon the parent wants another sync
	// for the plan's own sake, whatever the hook asked: a child it left
	// alone because the API server holds a newer version, which may be
	// the loop's own write that no echo syncs on.
	Recheck time.Duration
	// CustomizeDuration is the time spent in the customize hook.
	CustomizeDuration time.Duration
	// SyncDuration is the time spent in the sync or finalize hook.
	SyncDuration time.Duration
	// Patches say what each of spec.hooks.patches did, in order; empty
	// when the controller has none.
	Patches []patches.StepResult
	// PatchesDuration is the time spent in the patches.
	PatchesDuration time.Duration
	// Decoration is what a DecoratorController's hook sets on the object
	// besides its status; nil for a CompositeController.
	Decoration *Decoration
}

// Compute calls the hooks for one parent and returns the plan. On any hook
// error or invalid answer it returns (nil, err) — never a partial plan — so
// that a failing hook can never make its children be deleted. Invalid
// answers are reported as *InvalidResponseError.
func Compute(ctx context.Context, in Input) (*Plan, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	c := &computation{
		in:   in,
		plan: &Plan{},
		gvrs: map[schema.GroupVersionKind]resolved{},

		kindResources: map[schema.GroupKind]schema.GroupVersionResource{},
		compared:      map[comparedPair]comparison{},
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return c.plan, nil
}

func (in *Input) check() error {
	var errs []error
	if in.Definition == nil {
		errs = append(errs, errors.New("no controller definition"))
	}
	if in.Parent == nil {
		errs = append(errs, errors.New("no parent"))
	} else if in.Parent.GetAPIVersion() == "" || in.Parent.GetKind() == "" || in.Parent.GetName() == "" {
		errs = append(errs, errors.New("the parent must have apiVersion, kind and metadata.name"))
	}
	var kind string
	if in.Definition != nil {
		kind = in.Definition.Kind
	}
	if !in.Hooks.hasSync(kind) {
		errs = append(errs, errors.New("no sync hook"))
	}
	if in.Resolver == nil {
		errs = append(errs, errors.New("no KindResolver"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("can't sync: %w", errors.Join(errs...))
	}
	return nil
}

// computation holds the state of one Compute call.
type computation struct {
	in   Input
	plan *Plan
	// gvrs caches the resolver's answers.
	gvrs map[schema.GroupVersionKind]resolved
	// kindResources maps the kinds of desired children to their resources,
	// for the update strategy of a kind a ControllerRevision names.
	kindResources map[schema.GroupKind]schema.GroupVersionResource
	// observedByKey indexes the observed children by rollingKey.
	observedByKey map[string]*unstructured.Unstructured
	// compared holds the comparisons of this sync: a rolling update
	// compares a child up to three times, and a dry run is a request.
	compared map[comparedPair]comparison
}

type resolved struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	err        error
}

func (c *computation) resolve(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	r, ok := c.gvrs[gvk]
	if !ok {
		r.gvr, r.namespaced, r.err = c.in.Resolver.ResourceFor(gvk)
		c.gvrs[gvk] = r
	}
	return r.gvr, r.namespaced, r.err
}

// warn adds a warning to the plan, once.
func (p *Plan) warn(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(p.Warnings, msg) {
		p.Warnings = append(p.Warnings, msg)
	}
}

func (c *computation) run(ctx context.Context) error {
	hook := c.chooseHook()
	// call asks the hook for the desired children of the parent as it is
	// or, during a rolling update, as it was at an older revision.
	call := func(ctx context.Context, parent *unstructured.Unstructured) (*hookapi.SyncHookResponse, []desiredChild, error) {
		return c.desire(ctx, hook, parent)
	}
	resp, desired, err := call(ctx, c.in.Parent)
	if resp != nil {
		c.plan.Response = resp
	}
	if err != nil {
		return err
	}
	// Metacontroller's rule: a parent being deleted without the finalize
	// hook holding it has no rollout; its children are left alone.
	switch {
	case !c.in.Definition.Rolling || !c.in.Definition.ManagesChildren(c.in.Parent):
	case c.in.Parent.GetNamespace() == "":
		// ControllerRevisions are namespaced, as Metacontroller's, and a
		// cluster-scoped parent has no namespace to keep them in.
		c.plan.warn("rolling updates need a namespaced parent to keep its ControllerRevisions in; the children of this cluster-scoped parent are updated as with InPlace or Recreate")
	default:
		if desired, err = c.rollOut(ctx, call, desired); err != nil {
			return err
		}
	}
	for _, d := range desired {
		c.plan.Desired = append(c.plan.Desired, d.obj)
	}
	if !c.in.Definition.ManagesChildren(c.in.Parent) {
		return c.leaveChildren()
	}
	return c.buildItems(ctx, desired)
}

// chosenHook is the hook a sync calls: the sync or the finalize hook, in
// the shape of the controller's kind.
type chosenHook struct {
	sync      SyncHook      // a CompositeController's
	decorator DecoratorHook // a DecoratorController's
	name      string
	version   v1alpha1.HookVersion
}

// chooseHook picks the hook to call. Metacontroller calls the finalize
// hook for a parent that is being deleted or that stopped matching the
// controller's selector (it still carries the finalizer, or it would not
// be synced), and the sync hook otherwise, deleting parents included.
func (c *computation) chooseHook() chosenHook {
	spec := c.in.Definition.Hooks
	deleting := c.in.Parent.GetDeletionTimestamp() != nil
	leaving := deleting || !c.in.Definition.Selects(c.in.Parent)
	if leaving && spec.Finalize != nil {
		if c.in.Hooks.HasFinalize() {
			c.plan.Finalizing = true
			return chosenHook{sync: c.in.Hooks.Finalize, decorator: c.in.Hooks.Decorator.Finalize, name: definition.HookFinalize, version: spec.Finalize.Version}
		}
		c.plan.warn("the controller declares a finalize hook but it is not available here; the sync hook was called instead")
	}
	return chosenHook{sync: c.in.Hooks.Sync, decorator: c.in.Hooks.Decorator.Sync, name: definition.HookSync, version: spec.Sync.ContractVersion()}
}

// desire asks the hook for the desired children of parent and returns
// them validated and patched, with the hook's answer.
func (c *computation) desire(ctx context.Context, h chosenHook, parent *unstructured.Unstructured) (*hookapi.SyncHookResponse, []desiredChild, error) {
	related, err := c.related(ctx, parent, h.version)
	if err != nil {
		return nil, nil, err
	}
	// No copies: a webhook only encodes its request, and an in-process
	// hook gets a copy (InProcess).
	req := &hookapi.SyncHookRequest{
		Controller: c.in.Definition.Object,
		Parent:     parent,
		Children:   c.in.observedMap(h.version),
		Related:    related,
		Finalizing: c.plan.Finalizing,
		Encodings:  c.in.Encodings,
	}
	if c.plan.HookRequest == nil {
		c.plan.HookRequest = req
	}
	start := time.Now()
	resp, sent, err := c.callHook(ctx, h, req)
	if c.plan.HookRequest == req {
		c.plan.HookRequestJSON = sent
	}
	c.plan.SyncDuration += time.Since(start)
	if err != nil {
		return nil, nil, fmt.Errorf("%s hook: %w", h.name, err)
	}
	desired, err := c.validate(h.name, resp)
	if err != nil {
		return nil, nil, err
	}
	// The patches see the parent the hook saw: an older revision's
	// children are patched as that revision's parent would have them.
	if desired, err = c.patch(ctx, parent, desired); err != nil {
		return nil, nil, err
	}
	return resp, desired, nil
}

// leaveChildren plans nothing for the children of a parent that is being
// deleted without the controller's finalize hook holding it: the garbage
// collector removes them with the parent.
func (c *computation) leaveChildren() error {
	c.plan.warn("parent is being deleted; its children are left to the garbage collector")
	for _, list := range [][]*unstructured.Unstructured{c.in.Children.Owned, c.in.Children.Release} {
		for _, obj := range list {
			gvr, err := c.observedGVR(obj)
			if err != nil {
				return err
			}
			c.plan.Items = append(c.plan.Items, Item{Action: v1alpha1.SyncActionUnchanged, GVR: gvr, Observed: obj, Reason: reasonParentDeleting})
		}
	}
	sortItems(c.plan.Items)
	return nil
}

// observedMap is the children of the hook request: the owned children and
// the orphans about to be adopted (Metacontroller sends those too), keyed as
// the hook version wants. The objects are the caller's, not copies: an
// in-process hook gets a copy of its request (InProcess), and a webhook only
// encodes it.
func (in *Input) observedMap(version v1alpha1.HookVersion) hookapi.RelativeObjectMap {
	m := hookapi.RelativeObjectMap{}
	// Send an empty group for each declared child resource, so a hook can
	// tell "none of this kind" from "kind not watched". Only a resolver that
	// maps resources to kinds can name the kind of a resource without
	// objects; otherwise the kinds of the objects at hand have to do.
	for _, child := range in.Definition.Children {
		if gvk, err := in.Resolver.KindFor(child.GVR); err == nil {
			m.InitGroup(child.APIVersion(), gvk.Kind)
		}
	}
	ch := in.Children
	for _, list := range [][]*unstructured.Unstructured{ch.Owned, ch.Adopt, ch.Release, ch.Foreign} {
		for _, obj := range list {
			if obj != nil {
				m.InitGroup(obj.GetAPIVersion(), obj.GetKind())
			}
		}
	}
	for _, list := range [][]*unstructured.Unstructured{ch.Owned, ch.Adopt} {
		for _, obj := range list {
			if obj != nil {
				m.InsertRelative(version, in.Parent, obj)
			}
		}
	}
	return m
}

// related calls the customize hook, if the controller has one, and collects
// the objects its rules select, keyed for the hook version that receives
// them.
func (c *computation) related(ctx context.Context, parent *unstructured.Unstructured, version v1alpha1.HookVersion) (hookapi.RelativeObjectMap, error) {
	m := hookapi.RelativeObjectMap{}
	if c.in.Definition.Hooks.Customize == nil {
		return m, nil
	}
	if c.in.Hooks.Customize == nil {
		c.plan.warn("the controller declares a customize hook but it is not available here; the sync hook gets no related objects")
		return m, nil
	}
	start := time.Now()
	resp, err := c.in.Hooks.Customize.Customize(ctx, &hookapi.CustomizeHookRequest{
		Controller: c.in.Definition.Object.DeepCopy(),
		Decorator:  c.in.Definition.Decorator.DeepCopy(),
		Parent:     parent.DeepCopy(),
	})
	c.plan.CustomizeDuration = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%s hook: %w", definition.HookCustomize, err)
	}
	if err := validateRules(c.in.Definition.Name, resp); err != nil {
		return nil, err
	}
	if len(resp.RelatedResourceRules) == 0 {
		return m, nil
	}
	if c.in.Related == nil {
		c.plan.warn("customize hook asked for related objects but no target cluster is reachable; the sync hook gets none")
		return m, nil
	}
	for _, rule := range resp.RelatedResourceRules {
		gv, _ := schema.ParseGroupVersion(rule.APIVersion)
		gvr := gv.WithResource(rule.Resource)
		gvk, err := c.in.Resolver.KindFor(gvr)
		if errors.Is(err, definition.ErrNoKinds) {
			return nil, fmt.Errorf("can't look up related objects: %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("can't resolve related resource %s (%s) the customize hook asked for: %w", rule.Resource, rule.APIVersion, err)
		}
		_, namespaced, err := c.resolve(gvk)
		if err != nil {
			return nil, fmt.Errorf("can't resolve related resource %s (%s) the customize hook asked for: %w", rule.Resource, rule.APIVersion, err)
		}
		// Which objects a rule selects follows the customize hook's
		// version, as in Metacontroller; how they are keyed, the version
		// of the hook that receives them.
		query, err := NewRelatedQuery(rule, c.in.Definition.Hooks.Customize.Version, parent, gvr, namespaced)
		if err != nil {
			// validateRules let it through: it depends on the resource's
			// scope, known only now.
			return nil, &InvalidResponseError{Controller: c.in.Definition.Name, Hook: definition.HookCustomize,
				Problems: []string{fmt.Sprintf("relatedResources %s (%s): %v", rule.Resource, rule.APIVersion, err)}}
		}
		m.InitGroup(rule.APIVersion, gvk.Kind)
		objs, err := query.List(ctx, c.in.Related)
		if err != nil {
			return nil, fmt.Errorf("can't get the related objects of %s (%s) the customize hook asked for: %w", rule.Resource, rule.APIVersion, err)
		}
		for _, obj := range objs {
			if obj != nil {
				// Not copied, as the observed children (observedMap).
				m.InsertRelative(version, parent, obj)
			}
		}
	}
	return m, nil
}

// validateRules checks the rules of a customize hook's answer.
func validateRules(controller string, resp *hookapi.CustomizeHookResponse) error {
	var problems []string
	if resp == nil {
		problems = append(problems, "the hook returned no response")
	} else {
		for i, rule := range resp.RelatedResourceRules {
			at := field.NewPath("relatedResources").Index(i).String()
			switch {
			case rule == nil:
				problems = append(problems, fmt.Sprintf("%s is null", at))
				continue
			case rule.APIVersion == "":
				problems = append(problems, fmt.Sprintf("%s has no apiVersion", at))
			default:
				if _, err := schema.ParseGroupVersion(rule.APIVersion); err != nil {
					problems = append(problems, fmt.Sprintf("%s has an invalid apiVersion: %v", at, err))
				}
			}
			if rule.Resource == "" {
				problems = append(problems, fmt.Sprintf("%s has no resource", at))
			}
			if rule.LabelSelector != nil {
				if _, err := metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
					problems = append(problems, fmt.Sprintf("%s has an invalid labelSelector: %v", at, err))
				}
			}
			if rule.NamespaceSelector != nil {
				if _, err := metav1.LabelSelectorAsSelector(rule.NamespaceSelector); err != nil {
					problems = append(problems, fmt.Sprintf("%s has an invalid namespaceSelector: %v", at, err))
				}
			}
			if len(rule.Names) > 0 && (rule.LabelSelector != nil || rule.NamespaceSelector != nil) {
				problems = append(problems, fmt.Sprintf("%s sets names together with a labelSelector or namespaceSelector; Metacontroller takes one or the other", at))
			}
			if rule.Namespace != "" && rule.NamespaceSelector != nil {
				problems = append(problems, fmt.Sprintf("%s sets namespace together with namespaceSelector", at))
			}
		}
	}
	if len(problems) > 0 {
		return &InvalidResponseError{Controller: controller, Hook: definition.HookCustomize, Problems: problems}
	}
	return nil
}

// claimItems are the Orphan items and, with adopt, the Adopt items. A parent
// that is being deleted without a finalize hook adopts nothing: the garbage
// collector would delete what it adopted.
func (c *computation) claimItems(adopt bool) ([]Item, error) {
	var items []Item
	toAdopt := c.in.Children.Adopt
	if !adopt {
		toAdopt = nil
	}
	for _, claim := range []struct {
		objs   []*unstructured.Unstructured
		action v1alpha1.SyncAction
		reason string
	}{
		{toAdopt, v1alpha1.SyncActionAdopt, "matches the parent's selector and has no controller"},
		{c.in.Children.Release, v1alpha1.SyncActionOrphan, "no longer matches the parent's selector; released, not deleted"},
	} {
		for _, obj := range claim.objs {
			if obj == nil {
				continue
			}
			gvr, err := c.observedGVR(obj)
			if err != nil {
				return nil, err
			}
			items = append(items, Item{Action: claim.action, GVR: gvr, Observed: obj, Reason: claim.reason})
		}
	}
	return items, nil
}

func (c *computation) observedGVR(obj *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvr, _, err := c.resolve(obj.GroupVersionKind())
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("can't resolve the resource of observed child %s: %w", describe(obj), err)
	}
	return gvr, nil
}

// selector is the parent's selector, or nil with a warning when it has none
// (possible for an inline parent of a preview; the live loop cannot claim
// children without one and never gets here).
func (c *computation) selector() labels.Selector {
	sel, err := ParentSelector(c.in.Definition, c.in.Parent)
	if err != nil {
		c.plan.warn("desired children are not checked against the parent's selector: %v", err)
		return nil
	}
	return sel
}
