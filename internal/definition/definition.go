// Package definition compiles a controller once per generation into the one
// form everything else reads: the engine (internal/engine), one sync of a parent
// (internal/reconcile), the loop (internal/controller), /sync (internal/syncrequest), the
// rights checks (internal/rights) and `kubectl composite rbac` (internal/plugin).
//
// A Definition holds what a controller means rather than how it was written:
// its parent and child resources parsed once, with their kind and scope
// resolved through discovery; each child's update strategy; its hooks with
// version, decoding mode and timeout resolved (this package is the one place
// that defaults a hook); its patches compiled (enabledIf in CEL, templates
// parsed); the parent label selector; the revision field paths; the
// finalizer, the field manager; and the rights its loop uses, from which
// every other list of rights is derived.
//
// Every kind of controller compiles into a Definition through one Compile
// (compile.go): CompositeController in composite.go, DecoratorController in
// decorator.go (one parent view per decorated resource, see Parents), as
// Metacontroller keeps pkg/controller/common apart from composite/ and
// decorator/: what differs by kind is kept in those files, what every kind
// shares in compile.go and parents.go, and nothing below this package reads
// a controller's spec.
package definition

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// Hook names, as used in errors, metrics and InvalidResponseError.Hook.
const (
	HookSync      = "sync"
	HookFinalize  = "finalize"
	HookCustomize = "customize"
)

// DefaultHookTimeout is a call's timeout when the webhook sets none,
// Metacontroller's default.
const DefaultHookTimeout = 10 * time.Second

// DefaultHookVersion is the contract version of a hook that names none, as
// in Metacontroller.
const DefaultHookVersion = v1alpha1.HookVersionV1

// DefaultMode is how a hook of version decodes its answer when its webhook
// sets no responseUnMarshallMode: strictly for v2, loosely for v1. It is
// worked out rather than stored, as Metacontroller does, so that switching
// a hook's version switches its decoding too.
func DefaultMode(version v1alpha1.HookVersion) v1alpha1.ResponseUnmarshallMode {
	if version == v1alpha1.HookVersionV2 {
		return v1alpha1.ResponseUnmarshallModeStrict
	}
	return v1alpha1.ResponseUnmarshallModeLoose
}

// ControllerRevisions is the resource of ControllerRevision, served by this
// server in Metacontroller's group and version.
var ControllerRevisions = v1alpha1.SchemeGroupVersion.WithResource("controllerrevisions")

// Definition is one controller, compiled. It is immutable once compiled and
// safe to share between goroutines.
type Definition struct {
	// Kind is the kind of controller it was compiled from.
	Kind string
	// Name, UID and Generation identify the controller and the spec it
	// was compiled from.
	Name       string
	UID        types.UID
	Generation int64
	// Object is the CompositeController as written: hooks receive it as
	// request.controller, and Events are recorded on it. Nil for a
	// DecoratorController, which is in Decorator.
	Object *v1alpha1.CompositeController
	// Decorator is the DecoratorController as written; nil for a
	// CompositeController.
	Decorator *v1alpha1.DecoratorController
	// Decorated are a DecoratorController's resources; Parents gives one
	// view of the definition per resource.
	Decorated []Decorated

	Parent   Resource
	Children []Child
	// ParentLabels is the parent label selector, Everything when unset.
	ParentLabels labels.Selector
	// ParentAnnotations is a decorator's annotation selector; nil selects
	// every parent.
	ParentAnnotations labels.Selector
	// ChildAnnotation, when set (a DecoratorController's attachments),
	// makes a parent's children the objects it controls that carry this
	// annotation with the controller's name, instead of those the parent's
	// selector matches.
	ChildAnnotation string
	// IgnoreStatusChanges: a parent's change of status alone does not
	// trigger a sync.
	IgnoreStatusChanges bool
	// GenerateSelector: children are selected by the parent's uid rather
	// than by the parent's spec.selector.
	GenerateSelector bool
	// RevisionFieldPaths are the parent fields whose changes make a new
	// ControllerRevision; Rolling says whether any child resource has a
	// rolling update strategy (and so its parents get revisions).
	RevisionFieldPaths []string
	Rolling            bool

	Hooks Hooks
	// EndpointConfigs are the per-host connection settings of every hook.
	EndpointConfigs []v1alpha1.EndpointConfig

	// Finalizer is what the finalize hook keeps on parents; FieldManager
	// the server-side apply manager of the children.
	Finalizer    string
	FieldManager string
	// Workers is the controller's own number of workers; 0 means the
	// server's default.
	Workers int
	// IgnoreOwnChildWrites (spec.ownChildWrites: Ignore): the loop does
	// not call the sync hook again once it observes the children a sync
	// wrote.
	IgnoreOwnChildWrites bool
	// IgnoreOwnStatusWrites (spec.ownStatusWrites: Ignore): the loop does
	// not call the sync hook again once it observes its own write of the
	// hook's answer to the parent.
	IgnoreOwnStatusWrites bool
	// ResyncPeriod is how often each parent is synced without a change;
	// 0 for only on change. Metacontroller raises a period it is given to
	// at least a second.
	ResyncPeriod time.Duration
	// Rights are the rights the loop uses in the target cluster: the one
	// list from which the author's and the printed RBAC are derived.
	Rights []Right
	// References are the Secrets and ConfigMaps its hooks' credentials
	// and CA bundles come from.
	References []Reference
	// ServiceAccount is the identity the controller acts as
	// (spec.serviceAccount); nil for none of its own.
	ServiceAccount *v1alpha1.ServiceAccountReference
	// Author is who last wrote the controller's spec, as the server
	// recorded it (status.author); nil when unknown.
	Author *v1alpha1.ControllerAuthor
}

// Resource is a resource a controller names, resolved through discovery.
type Resource struct {
	GVR schema.GroupVersionResource
	// Kind and Namespaced are what the resolver said of the resource;
	// Err, why it said nothing (the target cluster does not serve it yet,
	// or there is no cluster that could tell).
	Kind       schema.GroupVersionKind
	Namespaced bool
	Err        error
}

// APIVersion is the resource's apiVersion as written in a manifest.
func (r Resource) APIVersion() string { return r.GVR.GroupVersion().String() }

// Child is a child resource and how its children are updated.
type Child struct {
	Resource
	// Method is the update method, OnDelete when unset.
	Method v1alpha1.ChildUpdateMethod
	// Strategy is the update strategy as written; nil when unset.
	Strategy *v1alpha1.CompositeControllerChildUpdateStrategy
}

// Hooks are a controller's hooks, resolved; nil for a hook not declared.
type Hooks struct {
	Sync, Finalize, Customize *Hook
	// Patches are spec.hooks.patches, in order.
	Patches []Patch
}

// Hook is one hook with its defaults resolved.
type Hook struct {
	// Name is the hook's role: sync, finalize, customize or patch:<name>.
	Name    string
	Version v1alpha1.HookVersion
	// Strict decodes the answer strictly (unknown fields are errors).
	Strict  bool
	Timeout time.Duration
	// Webhook is where and how the hook is called; nil when the hook is
	// declared without one.
	Webhook *v1alpha1.Webhook
}

// ContractVersion is the hook's version; v1 for a hook the controller does
// not declare, which only a Go caller can give the engine.
func (h *Hook) ContractVersion() v1alpha1.HookVersion {
	if h == nil {
		return DefaultHookVersion
	}
	return h.Version
}

// Patch is one of spec.hooks.patches, compiled.
type Patch struct {
	Name string
	// EnabledIf decides per parent whether the patch runs; nil always.
	EnabledIf *variables.Condition
	// Inline generates the patch of definitions[]; nil for a webhook.
	Inline hookapi.Generator
	// Webhook is the patch hook; nil for inline definitions.
	Webhook *Hook
}

// PatchHookName is how a patch is named as a hook: in errors, and in the
// hook label of the composite_hook_* metrics.
func PatchHookName(patch string) string { return "patch:" + patch }

// ResolveHook resolves a hook's version, decoding mode and timeout: the one
// place where a hook is defaulted. An unset version is v1; an unset
// responseUnMarshallMode is strict for v2 and loose for v1, worked out here
// rather than stored, as Metacontroller does, so that switching a hook's
// version switches its decoding too; an unset timeout is
// DefaultHookTimeout.
func ResolveHook(name string, version *v1alpha1.HookVersion, webhook *v1alpha1.Webhook) (*Hook, error) {
	h := &Hook{Name: name, Version: DefaultHookVersion, Timeout: DefaultHookTimeout, Webhook: webhook}
	if version != nil {
		switch *version {
		case "":
		case v1alpha1.HookVersionV1, v1alpha1.HookVersionV2:
			h.Version = *version
		default:
			return nil, fmt.Errorf("unsupported hook version %q: must be v1 or v2", *version)
		}
	}
	h.Strict = DefaultMode(h.Version) == v1alpha1.ResponseUnmarshallModeStrict
	if webhook == nil {
		return h, nil
	}
	if t := webhook.Timeout; t != nil && t.Duration > 0 {
		h.Timeout = t.Duration
	}
	if m := webhook.ResponseUnMarshallMode; m != nil {
		switch *m {
		case v1alpha1.ResponseUnmarshallModeStrict:
			h.Strict = true
		case v1alpha1.ResponseUnmarshallModeLoose:
			h.Strict = false
		default:
			return nil, fmt.Errorf("unsupported responseUnMarshallMode %q: must be loose or strict", *m)
		}
	}
	return h, nil
}

// Child returns the child resource gvr; false when the controller has none.
func (d *Definition) Child(gvr schema.GroupVersionResource) (Child, bool) {
	for _, c := range d.Children {
		if c.GVR == gvr {
			return c, true
		}
	}
	return Child{}, false
}

// UpdateMethod is the update method of the child resource gvr, OnDelete
// unless the controller says otherwise.
func (d *Definition) UpdateMethod(gvr schema.GroupVersionResource) v1alpha1.ChildUpdateMethod {
	if child, ok := d.Child(gvr); ok {
		return child.Method
	}
	return v1alpha1.ChildUpdateOnDelete
}

// ChildOfGroupResource returns the first child resource of gr, whatever its
// version: a ControllerRevision names children by group and kind only.
func (d *Definition) ChildOfGroupResource(gr schema.GroupResource) (Child, bool) {
	for _, c := range d.Children {
		if c.GVR.GroupResource() == gr {
			return c, true
		}
	}
	return Child{}, false
}

// ChildGVRs are the child resources, each once, in the order written.
func (d *Definition) ChildGVRs() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(d.Children))
	for _, c := range d.Children {
		out = append(out, c.GVR)
	}
	return out
}

// ManagesChildren tells whether a sync of parent may change its children.
// As Metacontroller: always while the parent lives; while it is being
// deleted, only when the controller's finalize hook holds it (its finalizer
// is on the parent) and no finalizer of the garbage collector is pending —
// foreground deletion or orphaning is the collector's to carry out.
func (d *Definition) ManagesChildren(parent *unstructured.Unstructured) bool {
	if parent.GetDeletionTimestamp() == nil {
		return true
	}
	for _, f := range parent.GetFinalizers() {
		if f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents {
			return false
		}
	}
	return d.Hooks.Finalize != nil && HasFinalizer(parent, d.Finalizer)
}

// Handles tells whether the controller syncs parent: one its label
// selector matches, or one that still carries its finalizer.
func (d *Definition) Handles(parent *unstructured.Unstructured) bool {
	return d.Selects(parent) || HasFinalizer(parent, d.Finalizer)
}

// HasFinalizer tells whether obj carries finalizer.
func HasFinalizer(obj metav1.Object, finalizer string) bool {
	return slices.Contains(obj.GetFinalizers(), finalizer)
}

// FieldManager is the server-side apply manager of one controller: each
// controller owns the fields of the children it applies, and no other.
func FieldManager(controller string) string {
	return "metacontroller.k8s.io/" + controller
}

// resolve asks resolver for the kind and scope of gvr; without a resolver
// they are unknown.
func resolve(gvr schema.GroupVersionResource, resolver KindResolver) Resource {
	r := Resource{GVR: gvr}
	if resolver == nil {
		r.Err = ErrNoKinds
		return r
	}
	if r.Kind, r.Err = resolver.KindFor(gvr); r.Err != nil {
		return r
	}
	_, r.Namespaced, r.Err = resolver.ResourceFor(r.Kind)
	return r
}

// Stale tells whether resolver now resolves one of d's resources, and
// otherwise than when d was compiled (a CRD was installed since, or changed
// its kind or scope): then d is compiled again. A resource that resolved and
// now does not is not a reason: a discovery that fails for a moment must not
// stop a running controller.
func (d *Definition) Stale(resolver KindResolver) bool {
	same := func(was Resource) bool {
		now := resolve(was.GVR, resolver)
		return now.Err != nil || (was.Err == nil && now.Kind == was.Kind && now.Namespaced == was.Namespaced)
	}
	for _, p := range d.parentResources() {
		if !same(p) {
			return true
		}
	}
	for _, c := range d.Children {
		if !same(c.Resource) {
			return true
		}
	}
	return false
}
