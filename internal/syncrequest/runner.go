// Package syncrequest serves /sync, a user's question to one controller,
// of either kind, about one parent, answered with its real hooks: it finds the parent (live or inline), runs the reconcile
// step the controller loop runs, with the caller's rights for what it
// reads, and, on a dry run, shows what an apply would store for each
// desired child, without storing anything: computed here with
// structured-merge-diff and the cluster's schemas (one preview costs about
// one hook call), or, when the request asks for it, by the target
// cluster's dry-run applies.
//
// The fleet preview of every live parent (internal/fleetpreview) runs
// this dry-run sync for each (shared.go).
package syncrequest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	sigsjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// maxConcurrentDryRunApplies bounds the dry-run applies of one preview
// with spec.serverDryRun.
const maxConcurrentDryRunApplies = 16

// deducedSchemas merge the children of a preview without a target cluster,
// whose schemas are unknown: maps field by field, lists whole.
var deducedSchemas = fieldowner.NewSchemas(nil)

// Runner runs SyncRequests.
type Runner struct {
	cluster *target.Cluster
	// authorizer checks that the caller may read and write what a sync
	// reads and writes on their behalf.
	authorizer authorizer.Authorizer
	// controllers are the controllers asked about, compiled.
	controllers *controllers
	recorder    record.EventRecorder
	// Identity is the operator's policy on controller identities: whom
	// a controller's reads and writes are checked against and done as.
	Identity rights.IdentityPolicy
	// caches are the loop's caches of child resources on this replica,
	// which fleet previews read instead of listing, and its comparison,
	// with which every sync compares children; nil for none.
	caches ChildCaches
	// gate admits a live sync beside the controller loop; nil for none.
	gate LoopGate
}

// LoopGate is where a live sync takes its turn on a parent with the
// controller loop (syncgate.Gate): it waits for the loop's sync of the
// parent on this replica to end, or refuses when another replica's loop
// syncs the parent. The sync runs in the context it returns, and calls
// done when it ends.
type LoopGate interface {
	AdmitLive(ctx context.Context, gr schema.GroupResource, key string) (syncCtx context.Context, done func(), err error)
}

// SyncBesideLoop makes live syncs take turns with the controller loop
// through gate. Call it before serving.
func (r *Runner) SyncBesideLoop(gate LoopGate) { r.gate = gate }

// ChildCaches are caches of child resources the server holds anyway: the
// controller loop's informers (sharedinformers.Caches).
type ChildCaches interface {
	// Children indexes gvr's objects by controller, when cached and
	// synced.
	Children(gvr schema.GroupVersionResource) (engine.ChildIndex, bool)
	// Ownership compares children as the loop does, remembering the
	// converged ones and what the target cluster's dry runs answered;
	// nil for none.
	Ownership() engine.FieldOwnership
}

// ReadChildrenFrom makes fleet previews read children from caches where
// they hold them, and every sync compare children with their Ownership.
// Call it before serving.
func (r *Runner) ReadChildrenFrom(caches ChildCaches) { r.caches = caches }

// NewRunner returns a Runner for cluster; a nil cluster means standalone
// mode, where only inline parents can be previewed.
func NewRunner(ctx context.Context, cluster *target.Cluster, authz authorizer.Authorizer, dest hooks.Destinations) *Runner {
	var secrets hooks.SecretSource = hooks.NoClusterSecretSource{}
	r := &Runner{cluster: cluster, authorizer: authz}
	if cluster != nil {
		secrets = hooks.NewClusterSecretSource(cluster.Kube)
		// A live /sync records the Events a loop sync records.
		broadcaster := reconcile.NewEventBroadcaster(ctx, 0, 0)
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cluster.Kube.CoreV1().Events("")})
		r.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "composite-apiserver"})
	}
	r.controllers = newControllers(secrets, dest)
	return r
}

// Run syncs the parent that req names with the hooks of controller (a
// v1alpha1 CompositeController or DecoratorController, whose parent is the
// object it decorates, of the resource its apiVersion and kind name)
// through the same reconcile step as the controller loop. A dry run
// persists nothing; otherwise the sync happens now (finalizer, adoption,
// children, status, Events) and the answer says what was done.
func (r *Runner) Run(ctx context.Context, controller runtime.Object, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error) {
	start := time.Now()
	if err := r.checkRequest(req, dryRun); err != nil {
		return nil, err
	}
	resolver := r.resolver()
	def, controllerHooks, act, err := r.compiled(ctx, controller, resolver)
	if err != nil {
		return nil, err
	}
	if def, err = parentView(def, req, resolver); err != nil {
		return nil, err
	}
	if !dryRun && r.gate != nil && req.Spec.ParentRef != nil {
		// Before the parent is read: what the loop's sync of it wrote
		// meanwhile is then read too.
		syncCtx, done, err := r.gate.AdmitLive(ctx, def.Parent.GVR.GroupResource(), parentKey(def, req.Spec.ParentRef))
		if err != nil {
			return nil, err
		}
		defer done()
		ctx = syncCtx
	}
	parent, err := r.parent(ctx, def, req)
	if err != nil {
		return nil, err
	}
	pausedWarning, err := pausedParent(def, parent, dryRun)
	if err != nil {
		return nil, err
	}
	if at, other := atParentsRevision(controller, parent); other {
		if def, controllerHooks, act, err = r.compiled(ctx, at, resolver); err != nil {
			return nil, err
		}
		if def, err = parentView(def, req, resolver); err != nil {
			return nil, err
		}
	}
	if err := r.checkReads(ctx, def, act, parent); err != nil {
		return nil, err
	}
	result, err := r.sync(ctx, &reconcile.Controller{Def: def, Hooks: controllerHooks.Hooks}, resolver, act, parent, req, dryRun)
	if err != nil {
		return nil, err
	}
	status, err := r.answer(ctx, def, req, dryRun, parent, result)
	if err != nil {
		return nil, err
	}
	if pausedWarning != "" {
		status.Warnings = append(status.Warnings, pausedWarning)
	}
	if result.res.Skipped == "" {
		status.Timings.TotalMillis = time.Since(start).Milliseconds()
	}
	return status, nil
}

func (r *Runner) resolver() definition.KindResolver {
	if r.cluster != nil {
		return definition.RESTMapperResolver(r.cluster.Discovery)
	}
	return definition.GuessingResolver()
}

// compiled is controller compiled, with its hooks built, and whom the sync
// acts as: a controller that does not compile is the request's fault (a
// 400), a hook that can't be built the hook's (a 502).
func (r *Runner) compiled(ctx context.Context, controller runtime.Object, resolver definition.KindResolver) (*definition.Definition, *hooks.ControllerHooks, *rights.Actor, error) {
	var act *rights.Actor
	def, controllerHooks, err := r.controllers.get(ctx, controller, resolver, func(def *definition.Definition) (hooks.SecretSource, error) {
		var err error
		if act, err = r.actorFor(ctx, def); err != nil {
			return nil, err
		}
		return hooks.SecretsAs(act.Kube(), r.controllers.secrets), nil
	})
	var invalid compileError
	var apiErr apierrors.APIStatus
	switch {
	case errors.As(err, &invalid):
		return nil, nil, nil, apierrors.NewBadRequest(invalid.Error())
	case errors.As(err, &apiErr):
		return nil, nil, nil, err
	case err != nil:
		return nil, nil, nil, HookFailed(err)
	}
	return def, controllerHooks, act, nil
}

// checkReads refuses a sync whose hook would get what the controller's
// identity could not list, whoever the caller is.
func (r *Runner) checkReads(ctx context.Context, def *definition.Definition, act *rights.Actor, parent *unstructured.Unstructured) error {
	if act.Subject.ServiceAccount == nil {
		return nil
	}
	if err := (rights.Access{Authorizer: r.authorizer}).CheckReads(ctx, act.Subject, def, parent.GetNamespace()); err != nil {
		return apierrors.NewForbidden(def.ControllerResource(), def.Name, err)
	}
	return nil
}

// synced is what a sync of the request did.
type synced struct {
	res *reconcile.Result
	// children keeps what the sync listed of the child resources (see
	// env).
	children *callerLister
	warnings []string
	// failed is why carrying out the plan failed in part; nil when it
	// did not.
	failed error
}

// sync runs the reconcile step for parent, with the caller's rights
// checked on what a live sync would write. An error answers the request:
// the sync did nothing worth showing.
func (r *Runner) sync(ctx context.Context, rec *reconcile.Controller, resolver definition.KindResolver, act *rights.Actor, parent *unstructured.Unstructured, req *v1alpha1.SyncRequest, dryRun bool) (*synced, error) {
	def := rec.Def
	opts := reconcile.Options{DryRun: dryRun}
	var err error
	if opts.Claimed, err = r.inlineChildren(parent, req); err != nil {
		return nil, err
	}
	env, children, warnings := r.env(resolver, r.authorizer, dryRun, act)
	if !dryRun {
		if err := Authorize(ctx, r.authorizer, "update", def.Parent.GVR, parent.GetNamespace(), parent.GetName()); err != nil {
			return nil, err
		}
		opts.Allow = func(ctx context.Context, plan *engine.Plan) error {
			return r.allowPlan(ctx, def.Parent.GVR, parent, plan)
		}
	}
	res, err := rec.Sync(ctx, env, parent, opts)
	warnings = append(warnings, res.Warnings...)
	if refused := (*rights.ForbiddenError)(nil); errors.As(err, &refused) {
		// A related list the controller's readers may not make: the sync
		// stopped before its hook, as the loop's does, rather than show
		// (or do) what the hook answers to a world without them.
		return nil, apierrors.NewForbidden(def.ControllerResource(), def.Name,
			fmt.Errorf("the sync hook was not called, nothing was changed: %w", refused))
	}
	if apierrors.IsForbidden(err) && len(res.Done) == 0 {
		// The caller may not do what the plan does: nothing was done.
		return nil, err
	}
	if err != nil && res.Plan == nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err
		}
		return nil, HookFailed(err)
	}
	return &synced{res: res, children: children, warnings: warnings, failed: err}, nil
}

// answer is what a sync of parent says: the plan, what was done, and, for
// a preview, each desired child as an apply would store it.
func (r *Runner) answer(ctx context.Context, def *definition.Definition, req *v1alpha1.SyncRequest, dryRun bool, parent *unstructured.Unstructured, result *synced) (*v1alpha1.SyncRequestStatus, error) {
	res := result.res
	status := &v1alpha1.SyncRequestStatus{DryRun: dryRun, Warnings: result.warnings}
	if res.Skipped != "" {
		// The loop leaves such a parent alone, and so does a live sync; a
		// preview says why its plan is empty.
		if !dryRun {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s %q does not sync %s %s: %s", def.Kind, def.Name, parent.GetKind(), parent.GetName(), res.Skipped))
		}
		status.Warnings = append(status.Warnings, "not synced: "+res.Skipped)
		return status, nil
	}
	if result.failed != nil {
		// Written children that failed are marked on their plan items;
		// this says the rest (e.g. the parent's status).
		status.Warnings = append(status.Warnings, result.failed.Error())
	}
	if err := planStatus(status, res); err != nil {
		return nil, err
	}
	stored := res.Plan.Desired
	if dryRun {
		var applyWarnings []string
		var err error
		if stored, applyWarnings, err = r.wouldApply(ctx, def, req, res, result.children); err != nil {
			return nil, err
		}
		status.Warnings = append(status.Warnings, applyWarnings...)
	}
	var err error
	if status.Children, err = encodeChildren(stored); err != nil {
		return nil, err
	}
	return status, nil
}

// wouldApply is each desired child of a preview as an apply would store
// it: asked of the target cluster by dry-run applies (spec.serverDryRun),
// or computed here.
func (r *Runner) wouldApply(ctx context.Context, def *definition.Definition, req *v1alpha1.SyncRequest, res *reconcile.Result, children *callerLister) ([]*unstructured.Unstructured, []string, error) {
	if !req.Spec.ServerDryRun {
		stored, warnings := r.wouldStore(def, res.Parent, res.Plan, children)
		return stored, warnings, nil
	}
	// A dry-run apply answers the object as the cluster would store it,
	// merged with what is stored now, read with the server's rights: the
	// caller must be allowed to read each one, or the preview would show
	// them what they may not read (a Secret's data, say).
	for _, item := range previewed(res.Plan) {
		if err := Authorize(ctx, r.authorizer, "get", item.GVR, item.Desired.GetNamespace(), item.Desired.GetName()); err != nil {
			return nil, nil, err
		}
	}
	stored, warnings := r.serverDryRun(ctx, def, res.Parent, res.Plan)
	return stored, warnings, nil
}

// parentKey is the controller loop's queue key of the parent ref names.
func parentKey(def *definition.Definition, ref *v1alpha1.ParentReference) string {
	if !def.Parent.Namespaced || ref.Namespace == "" {
		return ref.Name
	}
	return ref.Namespace + "/" + ref.Name
}

// pausedParent answers a sync of a parent annotated
// v1alpha1.ParentPausedAnnotation "true", which the controller loop does not
// sync: a live sync would run over the pause that an operator set, so it is
// refused; a preview runs, as it writes nothing, and warns that the loop
// does not sync the parent.
func pausedParent(def *definition.Definition, parent *unstructured.Unstructured, dryRun bool) (warning string, err error) {
	if parent.GetAnnotations()[v1alpha1.ParentPausedAnnotation] != "true" {
		return "", nil
	}
	if dryRun {
		return fmt.Sprintf("%s %s is annotated %s=true: the controller loop does not sync it, and a live /sync of it is refused while it is",
			parent.GetKind(), cache.MetaObjectToName(parent), v1alpha1.ParentPausedAnnotation), nil
	}
	ns := ""
	if parent.GetNamespace() != "" {
		ns = " -n " + parent.GetNamespace()
	}
	gr := def.Parent.GVR.GroupResource()
	return "", apierrors.NewConflict(gr, parent.GetName(), fmt.Errorf(
		"it is annotated %[1]s=true, so the controller loop does not sync it, and a live /sync does not run over the pause: "+
			"preview the sync with ?dryRun=All, or remove the annotation (kubectl annotate%[2]s %[3]s %[4]s %[1]s-) to sync it, which resumes the loop's syncs of it",
		v1alpha1.ParentPausedAnnotation, ns, gr, parent.GetName()))
}

// checkRequest refuses what a request can't ask of this server: a live
// sync without a target cluster or of an inline parent, and
// spec.serverDryRun outside a preview or without a cluster.
func (r *Runner) checkRequest(req *v1alpha1.SyncRequest, dryRun bool) error {
	switch {
	case !dryRun && r.cluster == nil:
		return apierrors.NewBadRequest("applying a sync needs a target cluster, and this server runs standalone: preview it with ?dryRun=All")
	case !dryRun && req.Spec.Parent != nil:
		return apierrors.NewBadRequest("an inline parent can only be previewed (?dryRun=All); name a live parent with spec.parentRef to sync it")
	case req.Spec.ServerDryRun && !dryRun:
		return apierrors.NewBadRequest("spec.serverDryRun is for previews (?dryRun=All): a sync without dryRun applies its children for real")
	case req.Spec.ServerDryRun && r.cluster == nil:
		return apierrors.NewBadRequest("spec.serverDryRun needs a target cluster to dry-run-apply the children, and this server runs standalone")
	}
	return nil
}

// env is where a sync of this request reads and writes: the target
// cluster, with the caller's rights for what it reads, or nothing at all
// (with a warning that says so) when the server runs standalone. children
// keeps what the sync lists of the child resources, where a preview finds
// the live child of a desired one the plan holds no observed object for
// (released, or someone else's); nil without a cluster.
func (r *Runner) env(resolver definition.KindResolver, authz authorizer.Authorizer, dryRun bool, act *rights.Actor) (env reconcile.Env, children *callerLister, warnings []string) {
	if r.cluster == nil {
		return reconcile.Env{Resolver: resolver}, nil, []string{"no target cluster: child kinds are mapped to resources by name, nothing is read from or applied to a cluster, and children are merged with schemas deduced from the objects (lists whole)"}
	}
	children = &callerLister{cluster: r.cluster, authorizer: authz, keep: dryRun}
	client, meta := r.cluster.Dynamic, r.cluster.Metadata
	if act.Clients != nil {
		client, meta = act.Clients.Dynamic, act.Clients.Metadata
	}
	var ownership engine.FieldOwnership = r.cluster.Schemas
	if r.caches != nil {
		// The loop's memo holds what the target cluster answered about
		// each child (admission, defaulting), which a preview, asking it
		// nothing, would otherwise not know: a child that admission alone
		// makes differ would be planned as an update the loop never makes.
		if o := r.caches.Ownership(); o != nil {
			ownership = o
		}
	}
	return reconcile.Env{
		Client:   client,
		Metadata: meta,
		Resolver: resolver,
		Children: children,
		// What reaches the hook: what the caller may list, and the
		// controller's identity or author too.
		Related: &rights.RelatedLister{
			ObjectLister: &callerLister{cluster: r.cluster, authorizer: authz},
			Access:       rights.Access{Authorizer: authz},
			Subjects:     act.Readers,
		},
		Recorder:  r.recorder,
		Ownership: ownership,
		Revisions: reconcile.ClientRevisions{Client: client},
	}, children, nil
}

// planStatus fills status with what the sync res planned and did: the hook
// request and answer, the patches, each plan item (with its error, when
// carrying it out failed), the rollout and the hooks' timings.
func planStatus(status *v1alpha1.SyncRequestStatus, res *reconcile.Result) error {
	plan := res.Plan
	var err error
	status.Finalized = plan.Response != nil && plan.Response.Finalized
	if plan.HookRequestJSON != nil {
		// What the webhook was sent, which is json.Marshal of
		// plan.HookRequest: encoding it again would cost as much.
		status.HookRequest = &runtime.RawExtension{Raw: plan.HookRequestJSON}
	} else if status.HookRequest, err = RawJSON(plan.HookRequest); err != nil {
		return err
	}
	if d := plan.Decoration; d != nil {
		status.ParentLabels, status.ParentAnnotations = d.Labels, d.Annotations
	}
	if status.Patches, err = patchSteps(plan.Patches); err != nil {
		return err
	}
	if plan.Response != nil {
		if plan.Response.Status != nil {
			if status.ParentStatus, err = RawJSON(plan.Response.Status); err != nil {
				return err
			}
		}
		if plan.Response.ResyncAfterSeconds > 0 {
			status.ResyncAfterSeconds = &plan.Response.ResyncAfterSeconds
		}
	}
	failed := map[string]error{}
	for _, d := range res.Done {
		if d.Err != nil {
			failed[d.String()] = d.Err
		}
	}
	if len(plan.Items) > 0 {
		// Sized once: grown by append, these large items are copied again
		// and again.
		status.Plan = make([]v1alpha1.SyncPlanItem, 0, len(plan.Items))
	}
	for _, item := range plan.Items {
		pi := PlanItem(item)
		key := apply.Done{Action: pi.Action, Kind: pi.Kind, Namespace: pi.Namespace, Name: pi.Name}.String()
		if err, ok := failed[key]; ok {
			pi.Error = err.Error()
		}
		status.Plan = append(status.Plan, pi)
	}
	status.Rollout = rollout(plan.Rollout)
	status.Timings = v1alpha1.SyncTimings{
		CustomizeHookMillis: plan.CustomizeDuration.Milliseconds(),
		SyncHookMillis:      plan.SyncDuration.Milliseconds(),
		PatchesMillis:       plan.PatchesDuration.Milliseconds(),
	}
	return nil
}

// encodeChildren encodes the children a sync would store, or stored.
func encodeChildren(stored []*unstructured.Unstructured) ([]runtime.RawExtension, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]runtime.RawExtension, 0, len(stored))
	for _, child := range stored {
		// The object's own encoder: json.Marshal would call it and then
		// compact what it wrote, a second pass over every child.
		data, err := child.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("can't encode the sync result: %w", err)
		}
		out = append(out, runtime.RawExtension{Raw: data})
	}
	return out, nil
}

// planVerbs are the verbs a caller needs for what a plan item does: a
// server-side apply that may create needs create and patch, adoption and
// release patch the child, recreation deletes it.
var planVerbs = map[v1alpha1.SyncAction][]string{
	v1alpha1.SyncActionCreate:   {"create", "patch"},
	v1alpha1.SyncActionUpdate:   {"patch"},
	v1alpha1.SyncActionRecreate: {"delete"},
	v1alpha1.SyncActionDelete:   {"delete"},
	v1alpha1.SyncActionAdopt:    {"patch"},
	v1alpha1.SyncActionOrphan:   {"patch"},
}

// allowPlan refuses a live sync whose plan does what the caller may not do
// themselves, naming every missing right: the server would otherwise lend
// its identity to them.
func (r *Runner) allowPlan(ctx context.Context, parentGVR schema.GroupVersionResource, parent *unstructured.Unstructured, plan *engine.Plan) error {
	var missing []string
	check := func(verb string, gvr schema.GroupVersionResource, subresource, namespace, name string) {
		if err := authorizeSubresource(ctx, r.authorizer, verb, gvr, subresource, namespace, name); err != nil {
			what := gvr.GroupResource().String()
			if subresource != "" {
				what += "/" + subresource
			}
			missing = append(missing, fmt.Sprintf("%s %s %s", verb, what, cache.NewObjectName(namespace, name)))
		}
	}
	for _, item := range plan.Items {
		obj := item.Desired
		if obj == nil {
			obj = item.Observed
		}
		for _, verb := range planVerbs[item.Action] {
			check(verb, item.GVR, "", obj.GetNamespace(), obj.GetName())
		}
		if item.Takeover != nil && item.Action == v1alpha1.SyncActionUnchanged {
			// A child taken over from Metacontroller is patched even
			// when nothing else of it changes.
			check("patch", item.GVR, "", obj.GetNamespace(), obj.GetName())
		}
	}
	// The rollout's ControllerRevisions are written in the parent's
	// namespace, in the server's name, too.
	if rollout := plan.Rollout; rollout != nil {
		for _, writes := range []struct {
			verb string
			revs []*v1alpha1.ControllerRevision
		}{{"create", rollout.Create}, {"update", rollout.Update}, {"delete", rollout.Delete}} {
			for _, rev := range writes.revs {
				check(writes.verb, definition.ControllerRevisions, "", rev.Namespace, rev.Name)
			}
		}
	}
	check("update", parentGVR, "status", parent.GetNamespace(), parent.GetName())
	if len(missing) > 0 {
		return apierrors.NewForbidden(parentGVR.GroupResource(), parent.GetName(), fmt.Errorf(
			"a sync writes with composite-apiserver's identity, and you may not do what this one would: %s", strings.Join(missing, "; ")))
	}
	return nil
}

// parent returns the inline parent, or reads the live one as the caller
// may.
func (r *Runner) parent(ctx context.Context, def *definition.Definition, req *v1alpha1.SyncRequest) (*unstructured.Unstructured, error) {
	gvr := def.Parent.GVR
	if req.Spec.Parent != nil {
		parent := &unstructured.Unstructured{}
		if err := parent.UnmarshalJSON(req.Spec.Parent.Raw); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.parent is not a Kubernetes object: %v", err))
		}
		if parent.GetAPIVersion() != def.Parent.APIVersion() {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.parent has apiVersion %q; %s %q manages %s of %s",
				parent.GetAPIVersion(), def.Kind, def.Name, gvr.Resource, def.Parent.APIVersion()))
		}
		if parent.GetName() == "" {
			return nil, apierrors.NewBadRequest("spec.parent.metadata.name is required")
		}
		return parent, nil
	}
	ref := req.Spec.ParentRef
	if r.cluster == nil {
		return nil, apierrors.NewBadRequest("spec.parentRef needs a target cluster, and this server runs standalone; send the parent inline in spec.parent")
	}
	if err := Authorize(ctx, r.authorizer, "get", gvr, ref.Namespace, ref.Name); err != nil {
		return nil, err
	}
	return r.cluster.Dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
}

// inlineChildren returns the inline observed children, claimed as owned;
// nil when the children are to be read from the cluster.
func (r *Runner) inlineChildren(parent *unstructured.Unstructured, req *v1alpha1.SyncRequest) (*engine.Claimed, error) {
	if req.Spec.Children != nil {
		var children hookapi.RelativeObjectMap
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Spec.Children.Raw, &children); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf(`spec.children must map "<Kind>.<apiVersion>" to objects by name: %v`, err))
		}
		owned := children.List()
		// Inline children stand for what the parent owns: make them so, as
		// the cluster would show them.
		ref := engine.ControllerRef(parent)
		for _, child := range owned {
			if child.GetNamespace() == "" {
				child.SetNamespace(parent.GetNamespace())
			}
			if metav1.GetControllerOfNoCopy(child) == nil {
				child.SetOwnerReferences(append(child.GetOwnerReferences(), ref))
			}
		}
		return &engine.Claimed{Owned: owned}, nil
	}
	if r.cluster == nil || (req.Spec.Parent != nil && parent.GetUID() == "") {
		// No cluster to read, or a parent that does not exist yet: it
		// owns nothing.
		return &engine.Claimed{}, nil
	}
	return nil, nil
}

// previewed are the plan's items whose desired child an apply would store.
func previewed(plan *engine.Plan) []engine.Item {
	items := make([]engine.Item, 0, len(plan.Items))
	for _, item := range plan.Items {
		if item.Desired != nil && item.Action != v1alpha1.SyncActionDelete {
			items = append(items, item)
		}
	}
	return items
}

// wouldStore returns the desired children as server-side applying them
// would store them, computed here rather than asked of the target cluster:
// the merge of kube-apiserver's field manager (fieldowner.WouldStore) over
// the live child the sync already read, with the cluster's schemas (deduced
// ones without a cluster). It sends no request: a preview costs its hook
// calls and the reads the sync makes anyway. What the cluster would add
// (defaults, admission) is not there; spec.serverDryRun asks for it. A
// child that can't be computed is shown as the hook returned it, with a
// warning.
func (r *Runner) wouldStore(def *definition.Definition, parent *unstructured.Unstructured, plan *engine.Plan, listed *callerLister) ([]*unstructured.Unstructured, []string) {
	schemas := deducedSchemas
	if r.cluster != nil {
		schemas = r.cluster.Schemas
	}
	manager := def.FieldManager
	// Every child gets the same ownerReferences, as the apply code sends
	// them; an inline parent that does not exist has no uid to refer to.
	// What WouldStore returns may share values with the plan's desired
	// children: it is only encoded.
	var ownerRefs []metav1.OwnerReference
	if parent.GetUID() != "" {
		ownerRefs = []metav1.OwnerReference{engine.ControllerRef(parent)}
	}
	items := previewed(plan)
	out := make([]*unstructured.Unstructured, 0, len(items))
	var warnings []string
	warn := func(msg string) {
		for _, w := range warnings {
			if w == msg {
				return
			}
		}
		warnings = append(warnings, msg)
	}
	for _, item := range items {
		desired := item.Desired
		if ownerRefs != nil {
			desired = engine.WithOwnerReferences(desired, ownerRefs)
		}
		observed, err := liveChild(item, listed)
		if err != nil {
			warn(fmt.Sprintf("can't preview the takeover of %s: %v", describe(item.Desired), err))
		}
		obj, fallback, err := schemas.WouldStore(observed, desired, manager)
		if err != nil {
			warn(fmt.Sprintf("can't compute what applying %s would store; it is shown as the hook returned it: %v", describe(item.Desired), err))
			obj = item.Desired
		} else if fallback != "" && r.cluster != nil {
			warn(fmt.Sprintf("previewed without the target cluster's schema, lists merged whole: %s", fallback))
		}
		out = append(out, obj)
	}
	return out, warnings
}

// liveChild is the object an apply of item's desired child would merge
// into: nil when the apply creates it, which a Recreate does once the old
// child is gone; the observed child, as the takeover from Metacontroller
// before the apply leaves it; else the object of that name the sync
// listed, if any (a released child, one someone else controls).
func liveChild(item engine.Item, listed *callerLister) (*unstructured.Unstructured, error) {
	if item.Action == v1alpha1.SyncActionRecreate {
		return nil, nil
	}
	observed := item.Observed
	if observed == nil {
		return listed.find(item.Desired), nil
	}
	if item.Takeover == nil {
		return observed, nil
	}
	taken, err := takenOver(observed, item.Takeover)
	if err != nil {
		return observed, err
	}
	return taken, nil
}

// takenOver is observed once the takeover patch is applied.
func takenOver(observed *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("can't read the takeover patch: %w", err)
	}
	data, err := observed.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("can't encode the observed child: %w", err)
	}
	if data, err = p.Apply(data); err != nil {
		return nil, fmt.Errorf("can't apply the takeover patch: %w", err)
	}
	taken := &unstructured.Unstructured{}
	if err := taken.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("can't decode the child taken over: %w", err)
	}
	return taken, nil
}

// serverDryRun returns the desired children as the target cluster would
// store them, by server-side applying each with dryRun=All: admission and
// defaulting included, at one round trip per child. A child the cluster
// would refuse is a warning: the answer still shows everything else.
func (r *Runner) serverDryRun(ctx context.Context, def *definition.Definition, parent *unstructured.Unstructured, plan *engine.Plan) ([]*unstructured.Unstructured, []string) {
	items := previewed(plan)
	// The dry-run applies are independent: send them at once, in order of
	// the plan in the answer. A preview's latency is then one round trip,
	// not one per child.
	out := make([]*unstructured.Unstructured, len(items))
	errs := make([]error, len(items))
	var g errgroup.Group
	g.SetLimit(maxConcurrentDryRunApplies)
	for i, item := range items {
		g.Go(func() error {
			child := item.Desired.DeepCopy()
			if parent.GetUID() != "" {
				child.SetOwnerReferences(engine.ChildOwnerReferences(parent, item.Desired))
			}
			// A refusal is this child's warning, not the preview's
			// failure: no error stops the others.
			out[i], errs[i] = apply.Child(ctx, r.cluster.Dynamic, item.GVR, child, def.Name, true)
			return nil
		})
	}
	_ = g.Wait()
	var warnings []string
	for i, err := range errs {
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("the target cluster would refuse this child: %v", err))
			out[i] = items[i].Desired
		}
	}
	return out, warnings
}

func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + cache.MetaObjectToName(obj).String()
}

// hookFailed answers a failed or invalid hook call: the hook, not the
// request or the server, is at fault, as a gateway's upstream would be.
func HookFailed(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadGateway,
		Reason:  "HookFailed",
		Message: err.Error(),
	}}
}

func PlanItem(item engine.Item) v1alpha1.SyncPlanItem {
	obj := item.Desired
	if obj == nil {
		obj = item.Observed
	}
	return v1alpha1.SyncPlanItem{
		Action:     item.Action,
		APIVersion: obj.GetAPIVersion(),
		Kind:       obj.GetKind(),
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		Reason:     item.Reason,
		Diff:       item.Diff,
		Revision:   item.Revision,
	}
}

// rollout is what a preview shows of a rolling update: the revisions, the
// child that moves next and what the others wait for.
func rollout(r *engine.Rollout) *v1alpha1.SyncRollout {
	if r == nil {
		return nil
	}
	out := &v1alpha1.SyncRollout{Reason: r.Reason, Message: r.Message, LatestRevision: r.Latest, Next: r.Next}
	for _, rev := range r.Revisions {
		n := 0
		for _, ck := range rev.Children {
			n += len(ck.Names)
		}
		out.Revisions = append(out.Revisions, v1alpha1.SyncRevision{Name: rev.Name, Children: int32(n)})
	}
	return out
}

// patchSteps are the patches of a plan as a preview shows them: each with
// the exact request it was given, usable as a patch hook's test fixture.
func patchSteps(steps []patches.StepResult) ([]v1alpha1.SyncPatchStep, error) {
	var out []v1alpha1.SyncPatchStep
	for _, s := range steps {
		step := v1alpha1.SyncPatchStep{Name: s.Name, Skipped: s.Skipped, Reason: s.Reason, DurationMillis: s.Duration.Milliseconds()}
		if s.Request != nil {
			var err error
			if step.Request, err = RawJSON(s.Request); err != nil {
				return nil, err
			}
		}
		for _, c := range s.Changes {
			step.Changes = append(step.Changes, v1alpha1.SyncPatchChange{
				APIVersion: c.Ref.APIVersion, Kind: c.Ref.Kind, Namespace: c.Ref.Namespace, Name: c.Ref.Name, Diff: c.Diff,
			})
		}
		out = append(out, step)
	}
	return out, nil
}

func RawJSON(v interface{}) (*runtime.RawExtension, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("can't encode the sync result: %w", err)
	}
	return &runtime.RawExtension{Raw: data}, nil
}
