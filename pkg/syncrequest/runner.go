// Package syncrequest answers the /sync subresource: it finds the parent
// (live or inline) and its children, runs the sync engine with the
// controller's real hooks, and, on a dry run, asks the target cluster what
// it would store for each desired child, without storing anything.
package syncrequest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	sigsjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/apply"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// maxConcurrentDryRunApplies bounds the dry-run applies of one preview.
const maxConcurrentDryRunApplies = 16

// Target is the cluster whose parents and children a sync reads and
// writes: the cluster of --kubeconfig, or the one the server runs in.
type Target struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// Mapper maps children's kinds to resources through discovery.
	Mapper meta.RESTMapper
	// Authorizer checks that the caller may read what a sync reads on
	// their behalf: the server's own identity must not lend its rights.
	Authorizer authorizer.Authorizer
}

// Runner runs SyncRequests.
type Runner struct {
	target *Target
	hooks  *hookCache
}

// NewRunner returns a Runner for target; a nil target means standalone
// mode, where only inline parents can be synced.
func NewRunner(target *Target) *Runner {
	var secrets hooks.SecretSource = hooks.NoClusterSecretSource{}
	if target != nil {
		secrets = hooks.NewClusterSecretSource(target.Kube)
	}
	return &Runner{target: target, hooks: newHookCache(secrets)}
}

// Run syncs the parent that req names with cc's hooks. A dry run
// persists nothing; otherwise the plan is applied now, by the same code as
// the controller loop's, and the answer says what was done.
func (r *Runner) Run(ctx context.Context, cc *v1alpha1.CompositeController, req *v1alpha1.SyncRequest, dryRun bool) (*v1alpha1.SyncRequestStatus, error) {
	start := time.Now()
	if !dryRun && r.target == nil {
		return nil, apierrors.NewBadRequest("applying a sync needs a target cluster, and this server runs standalone: preview it with ?dryRun=All")
	}
	if !dryRun && req.Spec.Parent != nil {
		return nil, apierrors.NewBadRequest("an inline parent can only be previewed (?dryRun=All); name a live parent with spec.parentRef to sync it")
	}
	parentGVR, err := parentResource(cc)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	parent, err := r.parent(ctx, cc, parentGVR, req)
	if err != nil {
		return nil, err
	}
	var warnings []string
	claimed, claimWarnings, err := r.children(ctx, cc, parent, req)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, claimWarnings...)

	controllerHooks, err := r.hooks.get(ctx, cc)
	if err != nil {
		return nil, hookFailed(err)
	}
	in := syncengine.Input{
		Controller: cc,
		Parent:     parent,
		Parents:    parentGVR,
		Children:   claimed,
		Hooks:      controllerHooks,
		Resolver:   syncengine.GuessingResolver(),
	}
	if r.target != nil {
		in.Resolver = syncengine.RESTMapperResolver(r.target.Mapper)
		in.Related = &relatedLister{target: r.target}
	} else {
		warnings = append(warnings, "no target cluster: child kinds are mapped to resources by name, and nothing is read from or applied to a cluster")
	}
	plan, err := syncengine.Compute(ctx, in)
	if err != nil {
		return nil, hookFailed(err)
	}
	warnings = append(warnings, plan.Warnings...)

	status := &v1alpha1.SyncRequestStatus{DryRun: dryRun, Finalized: plan.Response != nil && plan.Response.Finalized}
	if status.HookRequest, err = rawJSON(plan.HookRequest); err != nil {
		return nil, err
	}
	if plan.Response != nil {
		if plan.Response.Status != nil {
			if status.ParentStatus, err = rawJSON(plan.Response.Status); err != nil {
				return nil, err
			}
		}
		if plan.Response.ResyncAfterSeconds > 0 {
			status.ResyncAfterSeconds = &plan.Response.ResyncAfterSeconds
		}
	}
	for _, item := range plan.Items {
		status.Plan = append(status.Plan, planItem(item))
	}
	if dryRun {
		stored, applyWarnings := r.wouldStore(ctx, cc, parent, plan)
		warnings = append(warnings, applyWarnings...)
		for _, child := range stored {
			raw, err := rawJSON(child)
			if err != nil {
				return nil, err
			}
			status.Children = append(status.Children, *raw)
		}
	} else {
		applyWarnings, err := r.apply(ctx, cc, parentGVR, parent, plan, status)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, applyWarnings...)
	}
	status.Warnings = warnings
	status.Timings = v1alpha1.SyncTimings{
		CustomizeHookMillis: plan.CustomizeDuration.Milliseconds(),
		SyncHookMillis:      plan.SyncDuration.Milliseconds(),
		TotalMillis:         time.Since(start).Milliseconds(),
	}
	return status, nil
}

func parentResource(cc *v1alpha1.CompositeController) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(cc.Spec.ParentResource.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("spec.parentResource.apiVersion: %w", err)
	}
	return gv.WithResource(cc.Spec.ParentResource.Resource), nil
}

// parent returns the inline parent, or reads the live one as the caller
// may.
func (r *Runner) parent(ctx context.Context, cc *v1alpha1.CompositeController, gvr schema.GroupVersionResource, req *v1alpha1.SyncRequest) (*unstructured.Unstructured, error) {
	if req.Spec.Parent != nil {
		parent := &unstructured.Unstructured{}
		if err := parent.UnmarshalJSON(req.Spec.Parent.Raw); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.parent is not a Kubernetes object: %v", err))
		}
		if parent.GetAPIVersion() != cc.Spec.ParentResource.APIVersion {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.parent has apiVersion %q; CompositeController %q manages %s of %s",
				parent.GetAPIVersion(), cc.Name, cc.Spec.ParentResource.Resource, cc.Spec.ParentResource.APIVersion))
		}
		if parent.GetName() == "" {
			return nil, apierrors.NewBadRequest("spec.parent.metadata.name is required")
		}
		return parent, nil
	}
	ref := req.Spec.ParentRef
	if r.target == nil {
		return nil, apierrors.NewBadRequest("spec.parentRef needs a target cluster, and this server runs standalone; send the parent inline in spec.parent")
	}
	if err := r.target.authorize(ctx, "get", gvr, ref.Namespace, ref.Name); err != nil {
		return nil, err
	}
	parent, err := r.resource(gvr, ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return parent, nil
}

// children returns the inline observed children, or claims the live ones
// the way the controller loop does.
func (r *Runner) children(ctx context.Context, cc *v1alpha1.CompositeController, parent *unstructured.Unstructured, req *v1alpha1.SyncRequest) (syncengine.Claimed, []string, error) {
	if req.Spec.Children != nil {
		var children hookapi.RelativeObjectMap
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Spec.Children.Raw, &children); err != nil {
			return syncengine.Claimed{}, nil, apierrors.NewBadRequest(fmt.Sprintf(`spec.children must map "<Kind>.<apiVersion>" to objects by name: %v`, err))
		}
		owned := children.List()
		// Inline children stand for what the parent owns: make them so, as
		// the cluster would show them.
		ref := syncengine.ControllerRef(parent)
		for _, child := range owned {
			if child.GetNamespace() == "" {
				child.SetNamespace(parent.GetNamespace())
			}
			if metav1.GetControllerOfNoCopy(child) == nil {
				child.SetOwnerReferences(append(child.GetOwnerReferences(), ref))
			}
		}
		return syncengine.Claimed{Owned: owned}, nil, nil
	}
	if r.target == nil {
		return syncengine.Claimed{}, nil, nil
	}
	if req.Spec.Parent != nil && parent.GetUID() == "" {
		// A parent that does not exist yet owns nothing.
		return syncengine.Claimed{}, nil, nil
	}
	selector, err := syncengine.ParentSelector(cc, parent)
	if err != nil {
		return syncengine.Claimed{}, nil, apierrors.NewBadRequest(err.Error())
	}
	var candidates []*unstructured.Unstructured
	for i, child := range cc.Spec.ChildResources {
		gv, err := schema.ParseGroupVersion(child.APIVersion)
		if err != nil {
			return syncengine.Claimed{}, nil, apierrors.NewBadRequest(fmt.Sprintf("spec.childResources[%d].apiVersion: %v", i, err))
		}
		gvr := gv.WithResource(child.Resource)
		if err := r.target.authorize(ctx, "list", gvr, parent.GetNamespace(), ""); err != nil {
			return syncengine.Claimed{}, nil, err
		}
		list, err := r.resource(gvr, parent.GetNamespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return syncengine.Claimed{}, nil, fmt.Errorf("can't list %s: %w", gvr.Resource, err)
		}
		for j := range list.Items {
			candidates = append(candidates, &list.Items[j])
		}
	}
	claimed := syncengine.Claim(parent, selector, candidates, parent.GetDeletionTimestamp() == nil)
	var warnings []string
	for _, foreign := range claimed.Foreign {
		warnings = append(warnings, fmt.Sprintf("%s %s/%s matches the parent's selector but is controlled by %s; it is left alone",
			foreign.GetKind(), foreign.GetNamespace(), foreign.GetName(), describeController(foreign)))
	}
	return claimed, warnings, nil
}

// apply carries the plan out as the controller loop does, noting each
// child's failure in its plan item, and writes the parent's status.
func (r *Runner) apply(ctx context.Context, cc *v1alpha1.CompositeController, parentGVR schema.GroupVersionResource, parent *unstructured.Unstructured, plan *syncengine.Plan, status *v1alpha1.SyncRequestStatus) ([]string, error) {
	if err := r.target.authorize(ctx, "update", parentGVR, parent.GetNamespace(), parent.GetName()); err != nil {
		return nil, err
	}
	done, _ := apply.Execute(ctx, r.target.Dynamic, cc.Name, parent, plan)
	failed := map[string]error{}
	for _, d := range done {
		if d.Err != nil {
			failed[d.String()] = d.Err
		}
	}
	for i := range status.Plan {
		item := &status.Plan[i]
		key := apply.Done{Action: item.Action, Kind: item.Kind, Namespace: item.Namespace, Name: item.Name}.String()
		if err, ok := failed[key]; ok {
			item.Error = err.Error()
		}
	}
	var warnings []string
	if !plan.Finalizing && plan.Response != nil {
		if _, err := apply.ParentStatus(ctx, r.target.Dynamic, parentGVR, parent, plan.Response.Status); err != nil {
			warnings = append(warnings, err.Error())
		}
	}
	for _, child := range plan.Desired {
		raw, err := rawJSON(child)
		if err != nil {
			return nil, err
		}
		status.Children = append(status.Children, *raw)
	}
	return warnings, nil
}

// wouldStore returns the desired children as the target cluster would
// store them, by server-side applying each with dryRun=All; without a
// target, as the hook returned them. A child the cluster would refuse is a
// warning: the answer still shows everything else.
func (r *Runner) wouldStore(ctx context.Context, cc *v1alpha1.CompositeController, parent *unstructured.Unstructured, plan *syncengine.Plan) ([]*unstructured.Unstructured, []string) {
	if r.target == nil {
		return plan.Desired, nil
	}
	var items []syncengine.Item
	for _, item := range plan.Items {
		if item.Desired != nil && item.Action != v1alpha1.SyncActionDelete {
			items = append(items, item)
		}
	}
	// The dry-run applies are independent: send them at once, in order of
	// the plan in the answer. A preview's latency is then one round trip,
	// not one per child.
	out := make([]*unstructured.Unstructured, len(items))
	errs := make([]error, len(items))
	ref := syncengine.ControllerRef(parent)
	var wg sync.WaitGroup
	limit := make(chan struct{}, maxConcurrentDryRunApplies)
	for i, item := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			child := item.Desired.DeepCopy()
			if parent.GetUID() != "" {
				child.SetOwnerReferences([]metav1.OwnerReference{ref})
			}
			out[i], errs[i] = apply.Child(ctx, r.target.Dynamic, item.GVR, child, cc.Name, true)
		}()
	}
	wg.Wait()
	var warnings []string
	for i, err := range errs {
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("the target cluster would refuse this child: %v", err))
			out[i] = items[i].Desired
		}
	}
	return out, warnings
}

func (r *Runner) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return r.target.Dynamic.Resource(gvr)
	}
	return r.target.Dynamic.Resource(gvr).Namespace(namespace)
}

// authorize refuses to read or write, on the caller's behalf, what the
// caller could not themselves.
func (t *Target) authorize(ctx context.Context, verb string, gvr schema.GroupVersionResource, namespace, name string) error {
	if t.Authorizer == nil {
		return nil
	}
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(gvr.GroupResource(), name, errors.New("no user in the request"))
	}
	decision, reason, err := t.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: user, Verb: verb, Namespace: namespace, Name: name, ResourceRequest: true,
		APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource,
	})
	if err != nil && decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(gvr.GroupResource(), name, fmt.Errorf("a sync reads it on your behalf: %w", err))
	}
	if decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(gvr.GroupResource(), name, fmt.Errorf("a sync reads it on your behalf, and you may not %s it: %s", verb, reason))
	}
	return nil
}

// hookFailed answers a failed or invalid hook call: the hook, not the
// request or the server, is at fault, as a gateway's upstream would be.
func hookFailed(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadGateway,
		Reason:  "HookFailed",
		Message: err.Error(),
	}}
}

func planItem(item syncengine.Item) v1alpha1.SyncPlanItem {
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
	}
}

func describeController(obj metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	}
	return "another controller"
}

func rawJSON(v interface{}) (*runtime.RawExtension, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("can't encode the sync result: %w", err)
	}
	return &runtime.RawExtension{Raw: data}, nil
}
