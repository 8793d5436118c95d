// Package fleetpreview serves /preview: a controller, of either kind, or a
// proposed change of it, previewed against every live parent it selects,
// a page at a time, with the caller checked as its author. Each parent's
// preview is the dry-run sync its /sync would run (internal/syncrequest,
// whose compiled controllers, hooks and dry-run environment it shares).
package fleetpreview

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/syncrequest"
)

const (
	// fleetWorkers bounds the parents of one fleet preview previewed at
	// once, and so the hook calls it has in flight.
	fleetWorkers = 16
	// DefaultFleetLimit is a page's size when the request sets none, and
	// MaxFleetLimit the largest a request may ask: an answer holds every
	// changed field of its parents' children.
	DefaultFleetLimit = 100
	MaxFleetLimit     = 1000
	// fleetAnswerMargin is the time kept, before the request's deadline,
	// to encode and send the answer.
	fleetAnswerMargin = 3 * time.Second
)

// Previewer previews controllers with the hooks, rights and dry-run
// environment of /sync's runner.
type Previewer struct {
	sync *syncrequest.Runner
}

// New is a Previewer sharing sync's compiled controllers.
func New(sync *syncrequest.Runner) *Previewer { return &Previewer{sync: sync} }

// Preview previews controller (a v1alpha1 CompositeController or
// DecoratorController) against its live parents, those spec.selector
// picks, one page at a time: what a dry-run sync of each would do, with the
// controller's hooks. A DecoratorController's parents are the objects it
// decorates, resource by resource (a page holds the objects of one
// resource). controller is the stored one, or, when proposed, the stored
// one with the spec the caller proposes, whose hooks are built for this
// request only. Nothing is written.
//
// The caller is checked as the author of the controller
// (rights.AuthorRights): a preview sends the caller's hooks the live
// parents and children, and the Secrets the hooks name are read for them.
// The rights on namespaced parents and children are asked in each
// namespace previewed, and a namespace where the caller may not list the
// parents is skipped without a word.
func (r *Previewer) Preview(ctx context.Context, controller runtime.Object, proposed bool, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error) {
	if r.sync.Cluster() == nil {
		return nil, noFleetWithoutCluster
	}
	def, err := definition.Compile(controller, definition.RESTMapperResolver(r.sync.Cluster().Discovery))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var firstStep func(metav1.Object) bool
	if proposed {
		firstStep = firstStepOf(controller)
	}
	return r.previewDefinition(ctx, def, proposed, firstStep, spec, func(secrets hooks.SecretSource) (*hooks.ControllerHooks, error) {
		// Compiled once per request: the stored controller's hooks are
		// kept compiled as def, or built from it.
		return r.sync.StoredHooks(ctx, controller, def, secrets)
	})
}

var noFleetWithoutCluster = apierrors.NewBadRequest("a fleet preview reads the live parents from a target cluster, and this server runs standalone; preview one inline parent with /sync?dryRun=All")

// previewDefinition previews one page of def's parents: those of the
// parent resource (one of def.Parents()) the request's continue token is
// at. stored gives the stored controller's hooks, built once for every
// request; a proposal's are built for this request only.
func (r *Previewer) previewDefinition(ctx context.Context, def *definition.Definition, proposed bool, firstStep func(metav1.Object) bool,
	spec *v1alpha1.FleetPreviewSpec, stored func(hooks.SecretSource) (*hooks.ControllerHooks, error)) (*v1alpha1.FleetPreviewStatus, error) {
	start, err := parsePosition(spec.Continue)
	if err != nil {
		return nil, err
	}
	views := def.Parents()
	if start.View >= len(views) {
		return nil, apierrors.NewBadRequest("spec.continue is not a token a fleet preview of this controller answered; send status.continue of the previous page as it was")
	}
	f, err := r.newFleet(ctx, views[start.View], spec)
	if err != nil {
		return nil, err
	}
	f.view, f.views, f.firstStep = start.View, len(views), firstStep
	// The caller is the author here: related objects reach the hook only
	// where they (or the controller's identity) may list them.
	if f.act, err = r.sync.CallerActor(ctx, def); err != nil {
		return nil, err
	}
	secrets := r.sync.HookSecrets(f.act)
	// Built after the author checks, which cover the Secrets the hooks'
	// credentials come from (or read as the identity).
	var built *hooks.ControllerHooks
	if proposed {
		if built, err = r.sync.ProposedHooks(ctx, def, secrets); err != nil {
			return nil, syncrequest.HookFailed(err)
		}
		defer built.Close()
	} else if built, err = stored(secrets); err != nil {
		return nil, syncrequest.HookFailed(err)
	}
	return f.run(ctx, built.Hooks)
}

// fleet is one page of a fleet preview of a compiled controller. A
// DecoratorController is previewed by compiling it and calling newFleet
// and run as Preview does.
type fleet struct {
	r *Previewer
	// def is the controller, viewed on the parent resource previewed
	// (definition.Parents): view of views.
	def         *definition.Definition
	view, views int
	// act is whom the preview's reads for the hooks are checked against.
	act *rights.Actor
	// authz answers each question of this request once.
	authz authorizer.Authorizer
	// namespaced are the author's rights asked in each namespace
	// previewed; allowed keeps the answer per namespace.
	namespaced []definition.Right
	mu         sync.Mutex
	allowed    map[string]error

	selector labels.Selector
	// firstStep, for a proposal with a rollout, keeps the parents its
	// first step would move; nil keeps every one.
	firstStep     func(metav1.Object) bool
	limit         int
	allNamespaces bool
	start         position
}

// newFleet checks what does not depend on the namespace (the rights on
// named Secrets and ConfigMaps and on cluster-scoped resources, and on the
// namespaced ones when the caller holds them everywhere) and reads the
// request's selector, limit and continue token.
func (r *Previewer) newFleet(ctx context.Context, def *definition.Definition, spec *v1alpha1.FleetPreviewSpec) (*fleet, error) {
	f := &fleet{r: r, def: def, authz: syncrequest.NewRequestAuthorizer(r.sync.Authorizer()), allowed: map[string]error{}, limit: DefaultFleetLimit}
	if spec.Limit > 0 {
		f.limit = int(min(spec.Limit, MaxFleetLimit))
	}
	var err error
	if f.selector, err = parentSelector(def, spec.Selector); err != nil {
		return nil, err
	}
	if f.start, err = parsePosition(spec.Continue); err != nil {
		return nil, err
	}
	if r.sync.Authorizer() == nil {
		// Nobody to ask (an insecure test server): all is the caller's.
		f.allNamespaces = true
	} else if err := f.authorizeCaller(ctx); err != nil {
		return nil, err
	}
	if f.start.Namespace == "" && f.start.Continue == "" && f.start.Skip == 0 {
		// The first page of the parent resource.
		f.start.AllNamespaces = f.allNamespaces
	}
	return f, nil
}

// authorizeCaller asks the author's rights that do not depend on the
// namespace, and whether the caller may list the parents everywhere.
func (f *fleet) authorizeCaller(ctx context.Context) error {
	cluster, namespaced := rights.AuthorRightsByScope(f.def)
	if err := f.checkAuthor(ctx, cluster, ""); err != nil {
		return err
	}
	// Held in all namespaces, they need not be asked in each.
	if missing, err := rights.Missing(ctx, f.authz, namespaced); err == nil && len(missing) == 0 {
		namespaced = nil
	}
	f.namespaced = namespaced
	// A cluster-scoped parent resource's list right was asked with the
	// others above.
	f.allNamespaces = !f.def.Parent.Namespaced || syncrequest.Authorize(ctx, f.authz, "list", f.def.Parent.GVR, "", "") == nil
	return nil
}

func (f *fleet) checkAuthor(ctx context.Context, needed []definition.Right, namespace string) error {
	missing, err := rights.Missing(ctx, f.authz, needed)
	if err != nil {
		return apierrors.NewForbidden(f.def.ControllerResource(), f.def.Name, err)
	}
	return rights.AuthorForbidden(f.def.ControllerResource(), f.def, missing, namespace)
}

// namespaceAllowed says whether the caller holds, in namespace, the
// author's rights on namespaced parents and children.
func (f *fleet) namespaceAllowed(ctx context.Context, namespace string) error {
	if len(f.namespaced) == 0 || namespace == "" {
		return nil
	}
	f.mu.Lock()
	err, ok := f.allowed[namespace]
	f.mu.Unlock()
	if ok {
		return err
	}
	err = f.checkAuthor(ctx, rights.InNamespace(f.namespaced, namespace), namespace)
	f.mu.Lock()
	f.allowed[namespace] = err
	f.mu.Unlock()
	return err
}

// parentSelector is the controller's parent selector narrowed by the
// request's.
func parentSelector(def *definition.Definition, sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return def.ParentLabels, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.selector: %v", err))
	}
	reqs, _ := s.Requirements()
	return def.ParentLabels.Add(reqs...), nil
}

// run previews the page's parents, fleetWorkers at a time, within the
// request's deadline (the generic create handler gives a request 34 s at
// most) less fleetAnswerMargin to send the answer: a parent whose hooks
// have not answered by then is cut short, and it and the parents after
// it, started or not, are the next page's. A page thus ends in time
// whatever the hooks' timeouts, and holds at least its first parent, or a
// hook slower than a request would stop the fleet for good.
func (f *fleet) run(ctx context.Context, h engine.Hooks) (*v1alpha1.FleetPreviewStatus, error) {
	cands, next, done, err := f.gather(ctx)
	if err != nil {
		return nil, err
	}
	if f.firstStep != nil {
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return !f.firstStep(c.parent) })
	}
	env := f.r.sync.DryRunEnv(f.authz, f.act)
	owners := make(map[types.UID]bool, len(cands))
	for _, c := range cands {
		owners[c.parent.GetUID()] = true
	}
	env.Index = newPageChildren(f.r.sync.Cluster(), f.authz, f.r.sync.ChildCaches(), owners)
	rec := &reconcile.Controller{Def: f.def, Hooks: h}
	pageCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		pageCtx, cancel = context.WithDeadline(ctx, deadline.Add(-fleetAnswerMargin))
		defer cancel()
	}
	results := make([]v1alpha1.FleetPreviewParent, len(cands))
	// cut[i]: parent i was not started, or the page's deadline cut it
	// short.
	cut := make([]bool, len(cands))
	var g errgroup.Group
	g.SetLimit(fleetWorkers)
	for i, c := range cands {
		if pageCtx.Err() != nil {
			for j := i; j < len(cands); j++ {
				cut[j] = true
			}
			break
		}
		// Go waits for a worker: the deadline may pass meanwhile, and a
		// parent not started by then is the next page's.
		g.Go(func() error {
			if pageCtx.Err() != nil {
				cut[i] = true
				return nil
			}
			results[i] = f.previewParent(pageCtx, rec, env, c.parent)
			cut[i] = results[i].Error != "" && pageCtx.Err() != nil
			// A parent's failure is its own result, not the page's.
			return nil
		})
	}
	_ = g.Wait()
	// Parents are answered in order: the page ends before the first one
	// cut short, which then heads the next page.
	if k := slices.Index(cut, true); k >= 0 {
		if k == 0 {
			k = 1
		}
		if k < len(cands) {
			results, next, done = results[:k], cands[k].at, false
		}
	}
	status := &v1alpha1.FleetPreviewStatus{Parents: results}
	for i := range results {
		addUp(&status.Totals, &results[i])
	}
	if done && f.view+1 < f.views {
		// The next resource a DecoratorController decorates.
		next, done = position{View: f.view + 1}, false
	}
	if !done {
		status.Continue = next.token()
	}
	return status, nil
}

// previewParent is one parent's dry-run sync, summed up: the plan's
// counts, the items that change something, and the status the hook would
// write. A failure is this parent's error, not the page's.
func (f *fleet) previewParent(ctx context.Context, rec *reconcile.Controller, env reconcile.Env, parent *unstructured.Unstructured) v1alpha1.FleetPreviewParent {
	out := v1alpha1.FleetPreviewParent{Namespace: parent.GetNamespace(), Name: parent.GetName()}
	if err := f.namespaceAllowed(ctx, parent.GetNamespace()); err != nil {
		out.Error = err.Error()
		return out
	}
	if f.act.Subject.ServiceAccount != nil {
		// The hook gets what the controller's identity could list, as in
		// the loop and a /sync, whoever previews: the caller may read
		// parents the identity may not.
		if err := (rights.Access{Authorizer: f.authz}).CheckReads(ctx, f.act.Subject, f.def, parent.GetNamespace()); err != nil {
			out.Error = err.Error()
			return out
		}
	}
	res, err := rec.Sync(ctx, env, parent, reconcile.Options{DryRun: true})
	if res != nil {
		out.Warnings = res.Warnings
	}
	switch {
	case err != nil:
		out.Error = err.Error()
		return out
	case res.Skipped != "":
		out.Warnings = append(out.Warnings, "not synced: "+res.Skipped)
		return out
	}
	for _, item := range res.Plan.Items {
		count(&out.Counts, item.Action)
		if item.Action != v1alpha1.SyncActionUnchanged {
			out.Changes = append(out.Changes, syncrequest.PlanItem(item))
		}
	}
	if resp := res.Plan.Response; resp != nil {
		if resp.Status != nil {
			if out.ParentStatus, err = syncrequest.RawJSON(resp.Status); err != nil {
				out.Error = err.Error()
				return out
			}
		}
		out.StatusDiff = statusDiff(parent, resp.Status)
	}
	return out
}

// statusDiff lists what writing the hook's status would change in the
// parent's, which the write adds observedGeneration to
// (apply.ParentStatus).
func statusDiff(parent *unstructured.Unstructured, status map[string]interface{}) []string {
	desired := make(map[string]interface{}, len(status)+1)
	for k, v := range status {
		desired[k] = v
	}
	desired["observedGeneration"] = parent.GetGeneration()
	old, _ := parent.Object["status"].(map[string]interface{})
	if old == nil {
		old = map[string]interface{}{}
	}
	return patches.Diff(map[string]interface{}{"status": old}, map[string]interface{}{"status": desired})
}

func count(c *v1alpha1.FleetPreviewCounts, action v1alpha1.SyncAction) {
	switch action {
	case v1alpha1.SyncActionCreate:
		c.Create++
	case v1alpha1.SyncActionUpdate:
		c.Update++
	case v1alpha1.SyncActionRecreate:
		c.Recreate++
	case v1alpha1.SyncActionDelete:
		c.Delete++
	case v1alpha1.SyncActionAdopt:
		c.Adopt++
	case v1alpha1.SyncActionOrphan:
		c.Orphan++
	case v1alpha1.SyncActionUnchanged:
		c.Unchanged++
	}
}

func addUp(t *v1alpha1.FleetPreviewTotals, p *v1alpha1.FleetPreviewParent) {
	t.Parents++
	switch {
	case p.Error != "":
		t.Failed++
	case len(p.Changes) > 0 || len(p.StatusDiff) > 0:
		t.Changed++
	}
	t.Counts.Create += p.Counts.Create
	t.Counts.Update += p.Counts.Update
	t.Counts.Recreate += p.Counts.Recreate
	t.Counts.Delete += p.Counts.Delete
	t.Counts.Adopt += p.Counts.Adopt
	t.Counts.Orphan += p.Counts.Orphan
	t.Counts.Unchanged += p.Counts.Unchanged
}
