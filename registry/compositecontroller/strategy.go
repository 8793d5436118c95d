// Package compositecontroller is the registry of CompositeControllers: how
// they are created, updated, validated, stored and printed.
package compositecontroller

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/patches/variables"
)

// strategy is how the main resource is created and updated: users own the
// spec, the server owns the status.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	// rightsWarnings says, on create and on a spec change, which rights
	// the server lacks to run the controller; nil without a target cluster.
	rightsWarnings func(ctx context.Context, cc *metacontroller.CompositeController) []string
	// destinations are the address ranges hooks may not be called at.
	destinations hooks.Destinations
	// mayAuthor tells whether the request's user passes the author checks
	// of cc; nil without a target cluster.
	mayAuthor func(ctx context.Context, cc *metacontroller.CompositeController) bool
	// identityRequired refuses a controller that names no ServiceAccount
	// (--require-controller-service-account without a default).
	identityRequired bool
}

// expressions compiles the CEL and templates of patches with the patch
// engine's own compiler, so that what validation accepts is what runs.
var expressions validation.Expressions = variables.Expressions{}

var _ rest.RESTCreateUpdateStrategy = strategy{}
var _ rest.ResetFieldsStrategy = strategy{}
var _ rest.RESTDeleteStrategy = strategy{}

// NewStrategy returns the strategy of the compositecontrollers resource.
func NewStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

func (strategy) NamespaceScoped() bool { return false }

// GetResetFields tells server-side apply that status is not the user's:
// fields a user applies under status through the main resource are
// dropped, and nobody's ownership of them is recorded.
func (strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"metacontroller.k8s.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate clears the status, which only the controller may write,
// starts the generation at 1, and makes managedFields name the fields an
// object in Metacontroller's earliest shape is stored in.
func (strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	cc := obj.(*metacontroller.CompositeController)
	cc.Status = metacontroller.CompositeControllerStatus{Author: AuthorOf(ctx)}
	cc.Generation = 1
	translateLegacyManagedFields(cc)
}

// AuthorOf is the user of the request in ctx, as the controller's author;
// nil when the request has none.
func AuthorOf(ctx context.Context) *metacontroller.ControllerAuthor {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || u == nil {
		return nil
	}
	a := &metacontroller.ControllerAuthor{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		a.Extra = make(map[string]metacontroller.ExtraValue, len(extra))
		for k, v := range extra {
			a.Extra[k] = v
		}
	}
	return a
}

// PrepareForUpdate keeps the stored status and bumps the generation when,
// and only when, the spec changed, so that status.observedGeneration tells
// whether the loop runs the current spec; whoever changes the spec becomes
// its author. managedFields name the fields an object in Metacontroller's
// earliest shape is stored in.
func (s strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newCC := obj.(*metacontroller.CompositeController)
	oldCC := old.(*metacontroller.CompositeController)
	newCC.Status = oldCC.Status
	dropDefaultedModes(newCC, oldCC)
	translateLegacyManagedFields(newCC)
	switch {
	case !apiequality.Semantic.DeepEqual(newCC.Spec, oldCC.Spec):
		newCC.Generation = oldCC.Generation + 1
		newCC.Status.Author = AuthorOf(ctx)
	case oldCC.Status.Author == nil && (s.mayAuthor == nil || s.mayAuthor(ctx, newCC)):
		// A controller stored before authors were recorded runs nothing
		// until someone who passes the author checks writes it again, its
		// spec unchanged or not (`kubectl apply` of the same manifest, an
		// annotation); a write by anyone else (the garbage collector
		// updating metadata) leaves it unknown.
		newCC.Status.Author = AuthorOf(ctx)
	}
}

// dropDefaultedModes clears a hook's responseUnMarshallMode that an older
// server stored as the default of the hook's version, when an update
// changes the version and leaves the mode as it was: the mode was never
// the author's, and kept, it would pin a v2 hook to v1's loose decoding
// (or a v1 hook to v2's strict one). A stored mode equal to its version's
// default counts as unset.
func dropDefaultedModes(newCC, oldCC *metacontroller.CompositeController) {
	if newCC.Spec.Hooks == nil || oldCC.Spec.Hooks == nil {
		return
	}
	pairs := [][2]*metacontroller.Hook{
		{newCC.Spec.Hooks.Sync, oldCC.Spec.Hooks.Sync},
		{newCC.Spec.Hooks.Finalize, oldCC.Spec.Hooks.Finalize},
		{newCC.Spec.Hooks.Customize, oldCC.Spec.Hooks.Customize},
	}
	for _, p := range pairs {
		cur, old := p[0], p[1]
		if cur == nil || old == nil || cur.Webhook == nil || old.Webhook == nil {
			continue
		}
		mode, oldMode := cur.Webhook.ResponseUnMarshallMode, old.Webhook.ResponseUnMarshallMode
		if mode == nil || oldMode == nil || *mode != *oldMode || hookVersion(cur) == hookVersion(old) {
			continue
		}
		if *oldMode == defaultMode(hookVersion(old)) {
			cur.Webhook.ResponseUnMarshallMode = nil
		}
	}
}

func hookVersion(h *metacontroller.Hook) metacontroller.HookVersion {
	if h.Version == nil || *h.Version == "" {
		return metacontroller.HookVersionV1
	}
	return *h.Version
}

func defaultMode(v metacontroller.HookVersion) metacontroller.ResponseUnmarshallMode {
	if v == metacontroller.HookVersionV2 {
		return metacontroller.ResponseUnmarshallModeStrict
	}
	return metacontroller.ResponseUnmarshallModeLoose
}

func (s strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	cc := obj.(*metacontroller.CompositeController)
	errs := append(validation.ValidateCompositeController(cc, expressions), s.validateDestinations(cc)...)
	return append(errs, s.validateIdentity(cc)...)
}

// validateIdentity refuses a controller without a ServiceAccount on a
// server whose operator runs none with the server's own rights.
func (s strategy) validateIdentity(cc *metacontroller.CompositeController) field.ErrorList {
	if s.identityRequired && cc.Spec.ServiceAccount == nil {
		return field.ErrorList{field.Required(field.NewPath("spec", "serviceAccount"),
			"this server runs only controllers that act as a ServiceAccount (--require-controller-service-account): name one your user may impersonate")}
	}
	return nil
}

// validateDestinations refuses hook URLs whose host is an address in a
// range the server does not call hooks at (--hook-denied-cidrs). A host
// name is checked when the hook is called, address by address.
func (s strategy) validateDestinations(cc *metacontroller.CompositeController) field.ErrorList {
	var errs field.ErrorList
	if cc.Spec.Hooks == nil {
		return nil
	}
	hooksPath := field.NewPath("spec", "hooks")
	check := func(path *field.Path, w *metacontroller.Webhook) {
		if w == nil || w.URL == nil {
			return
		}
		if err := s.destinations.CheckURL(*w.URL); err != nil {
			errs = append(errs, field.Forbidden(path.Child("webhook", "url"), err.Error()))
		}
	}
	for _, h := range []struct {
		name string
		hook *metacontroller.Hook
	}{{"sync", cc.Spec.Hooks.Sync}, {"finalize", cc.Spec.Hooks.Finalize}, {"customize", cc.Spec.Hooks.Customize}} {
		if h.hook != nil {
			check(hooksPath.Child(h.name), h.hook.Webhook)
		}
	}
	for i := range cc.Spec.Hooks.Patches {
		check(hooksPath.Child("patches").Index(i), cc.Spec.Hooks.Patches[i].Webhook)
	}
	return errs
}

// WarningsOnCreate names each conversion from Metacontroller's earliest
// shape first, then what validation advises and the rights the server lacks.
func (s strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	cc := obj.(*metacontroller.CompositeController)
	warnings := append(legacyShapeWarnings(cc), validation.Warnings(cc, expressions)...)
	if s.rightsWarnings != nil {
		warnings = append(warnings, s.rightsWarnings(ctx, cc)...)
	}
	return warnings
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	cc, oldCC := obj.(*metacontroller.CompositeController), old.(*metacontroller.CompositeController)
	errs := append(validation.ValidateCompositeControllerUpdate(cc, oldCC, expressions), s.validateDestinations(cc)...)
	if !apiequality.Semantic.DeepEqual(cc.Spec, oldCC.Spec) {
		// A controller stored before the flag was set keeps working
		// through metadata updates; its loop refuses to run it.
		errs = append(errs, s.validateIdentity(cc)...)
	}
	return errs
}

func (s strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	cc := obj.(*metacontroller.CompositeController)
	warnings := append(legacyShapeWarnings(cc), validation.Warnings(cc, expressions)...)
	if s.rightsWarnings != nil && !apiequality.Semantic.DeepEqual(cc.Spec, old.(*metacontroller.CompositeController).Spec) {
		warnings = append(warnings, s.rightsWarnings(ctx, cc)...)
	}
	return warnings
}

// legacyShapeWarnings takes the record the conversion from v1alpha1 left on
// an object written in Metacontroller's earliest shape and answers a
// warning per conversion, as Kubernetes warns of a deprecated field. The
// conversion has no request to warn on; the strategy does. Taking the record
// leaves the object as it will be stored.
func legacyShapeWarnings(cc *metacontroller.CompositeController) []string {
	if l := cc.TakeLegacyShape(); l != nil {
		return l.Conversions
	}
	return nil
}

// Canonicalize has nothing to normalise: defaulting already did.
func (strategy) Canonicalize(obj runtime.Object) {}

func (strategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// AllowUnconditionalUpdate lets `kubectl replace` without a resourceVersion
// work as it does for built-in resources.
func (strategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// statusStrategy is how the status subresource updates an object: the
// controller owns the status, and nothing else changes through it.
type statusStrategy struct {
	strategy
}

var _ rest.RESTUpdateStrategy = statusStrategy{}

// NewStatusStrategy returns the strategy of compositecontrollers/status.
func NewStatusStrategy(s strategy) statusStrategy {
	return statusStrategy{s}
}

// GetResetFields makes server-side apply through /status ignore everything
// but status.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"metacontroller.k8s.io/v1alpha1": fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata"),
		),
	}
}

// PrepareForUpdate keeps everything but the status as stored.
func (statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newCC := obj.(*metacontroller.CompositeController)
	oldCC := old.(*metacontroller.CompositeController)
	newCC.Spec = oldCC.Spec
	newCC.Labels = oldCC.Labels
	newCC.Annotations = oldCC.Annotations
	newCC.Finalizers = oldCC.Finalizers
	newCC.OwnerReferences = oldCC.OwnerReferences
	newCC.Generation = oldCC.Generation
	// The author is the spec's: a status writer cannot choose it.
	newCC.Status.Author = oldCC.Status.Author
}

func (statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateCompositeControllerStatusUpdate(obj.(*metacontroller.CompositeController), old.(*metacontroller.CompositeController))
}

// AllowUnconditionalUpdate is false: a status writer must say which
// version it read, so that two writers never silently overwrite each other.
func (statusStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return false }

// WarningsOnUpdate has nothing to say: the spec cannot change here.
func (statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// GetAttrs returns the labels and fields a list or watch may select on.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	cc, ok := obj.(*metacontroller.CompositeController)
	if !ok {
		return nil, nil, fmt.Errorf("not a CompositeController: %T", obj)
	}
	return labels.Set(cc.Labels), generic.ObjectMetaFieldsSet(&cc.ObjectMeta, false), nil
}

// MatchCompositeController is the filter of lists and watches.
func MatchCompositeController(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
