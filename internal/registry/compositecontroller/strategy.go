// Package compositecontroller is the registry of CompositeControllers: how
// they are created, updated, validated, stored and printed.
package compositecontroller

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/apicheck"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// strategy is how the main resource is created and updated: users own the
// spec, the server owns the status.
type strategy struct {
	controllerregistry.Controller
	runtime.ObjectTyper
	names.NameGenerator
	// rightsWarnings says, on create and on a spec change, which rights
	// the server lacks to run the controller; nil without a target cluster.
	rightsWarnings func(ctx context.Context, cc runtime.Object) []string
	// destinations are the address ranges hooks may not be called at.
	destinations hooks.Destinations
	// mayAuthor tells whether the request's user passes the author checks
	// of cc; nil without a target cluster.
	mayAuthor func(ctx context.Context, cc runtime.Object) bool
	// authors decides who becomes the author of what a request writes.
	authors controllerregistry.Authors
	// identityRequired refuses a controller that names no ServiceAccount
	// (--require-controller-service-account without a default).
	identityRequired bool
	// healthCost checks a new health condition against the parent
	// resource's schema; nil without a target cluster.
	healthCost controllerregistry.HealthCheck
}

// expressions compiles the CEL and templates of patches with the patch
// engine's own compiler, so that what validation accepts is what runs.
var expressions validation.Expressions = apicheck.Expressions{}

var _ rest.RESTCreateUpdateStrategy = strategy{}
var _ rest.ResetFieldsStrategy = strategy{}
var _ rest.RESTDeleteStrategy = strategy{}

// NewStrategy returns the strategy of the compositecontrollers resource.
func NewStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

// PrepareForCreate clears the status, which only the controller may write,
// starts the generation at 1, stamps a resume with the server's time, and
// makes managedFields name the fields an object in Metacontroller's
// earliest shape is stored in.
func (s strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	cc := obj.(*metacontroller.CompositeController)
	cc.Status = metacontroller.CompositeControllerStatus{Author: s.authors.Of(ctx), Revision: 1}
	cc.Generation = 1
	controllerregistry.StampResume(&cc.ObjectMeta, nil)
	translateLegacyManagedFields(cc)
}

// PrepareForUpdate keeps the stored status and bumps the generation when,
// and only when, the spec changed, so that status.observedGeneration tells
// whether the loop runs the current spec; whoever changes the spec becomes
// its author. A resume it requests carries the server's time.
// managedFields name the fields an object in Metacontroller's earliest
// shape is stored in.
func (s strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newCC := obj.(*metacontroller.CompositeController)
	oldCC := old.(*metacontroller.CompositeController)
	newCC.Status = oldCC.Status
	controllerregistry.StampResume(&newCC.ObjectMeta, &oldCC.ObjectMeta)
	dropDefaultedModes(newCC, oldCC)
	translateLegacyManagedFields(newCC)
	switch {
	case !apiequality.Semantic.DeepEqual(newCC.Spec, oldCC.Spec):
		newCC.Generation = oldCC.Generation + 1
		if !revisions.SameRevision(oldCC.Spec, newCC.Spec) {
			// A change of the rollout alone (kubectl composite rollout
			// pause) runs nothing new: the revision keeps its author.
			newCC.Status.Author = s.authors.Of(ctx)
		}
		newCC.Status.Revision, newCC.Status.History, _ = updateRevisions(newCC, oldCC)
	case oldCC.Status.Author == nil:
		// A controller stored before authors were recorded runs nothing
		// until someone who passes the author checks writes it again, its
		// spec unchanged or not (`kubectl apply` of the same manifest, an
		// annotation); a write by anyone else (the garbage collector
		// updating metadata, this server labelling it) leaves it unknown.
		if author := s.authors.Of(ctx); author != nil && (s.mayAuthor == nil || s.mayAuthor(ctx, newCC)) {
			newCC.Status.Author = author
		}
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

// hookVersion is h's version, defaulted as the loop defaults it.
func hookVersion(h *metacontroller.Hook) metacontroller.HookVersion {
	if h.Version == nil || *h.Version == "" {
		return metacontroller.HookVersion(definition.DefaultHookVersion)
	}
	return *h.Version
}

// defaultMode is the decoding mode of a hook of version v that sets none.
func defaultMode(v metacontroller.HookVersion) metacontroller.ResponseUnmarshallMode {
	return metacontroller.ResponseUnmarshallMode(definition.DefaultMode(v1alpha1.HookVersion(v)))
}

// updateRevisions numbers newCC's spec, replacing oldCC's, and keeps its
// history; dropped are the revisions the history's size dropped.
func updateRevisions(newCC, oldCC *metacontroller.CompositeController) (int64, []metacontroller.CompositeControllerRevision, []int64) {
	return revisions.Update(oldCC.Spec, newCC.Spec, oldCC.Status.Revision, oldCC.Status.Author,
		oldCC.Status.History, oldCC.Status.Rollout, controllerregistry.HistoryLimit(newCC.Spec.RevisionHistoryLimit))
}

func (s strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	cc := obj.(*metacontroller.CompositeController)
	errs := append(validation.ValidateCompositeController(cc, expressions), s.validateDestinations(cc)...)
	errs = append(errs, s.healthCost.Validate(ctx, cc, nil)...)
	return append(errs, s.validateIdentity(cc)...)
}

// validateIdentity refuses a controller without a ServiceAccount on a
// server whose operator runs none with the server's own rights.
func (s strategy) validateIdentity(cc *metacontroller.CompositeController) field.ErrorList {
	return controllerregistry.ValidateIdentity(s.identityRequired, cc.Spec.ServiceAccount)
}

// validateDestinations refuses hook URLs whose host is an address in a
// range the server does not call hooks at (--hook-denied-cidrs). A host
// name is checked when the hook is called, address by address.
func (s strategy) validateDestinations(cc *metacontroller.CompositeController) field.ErrorList {
	if cc.Spec.Hooks == nil {
		return nil
	}
	h := cc.Spec.Hooks
	hooksPath := field.NewPath("spec", "hooks")
	errs := controllerregistry.ValidateHookDestinations(s.destinations, hooksPath,
		[]controllerregistry.NamedHook{{Name: "sync", Hook: h.Sync}, {Name: "finalize", Hook: h.Finalize}, {Name: "customize", Hook: h.Customize}})
	for i := range h.Patches {
		if w := h.Patches[i].Webhook; w != nil && w.URL != nil {
			if err := s.destinations.CheckURL(*w.URL); err != nil {
				errs = append(errs, field.Forbidden(hooksPath.Child("patches").Index(i).Child("webhook", "url"), err.Error()))
			}
		}
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
	errs = append(errs, s.healthCost.Validate(ctx, cc, oldCC)...)
	if !apiequality.Semantic.DeepEqual(cc.Spec, oldCC.Spec) {
		// A controller stored before the flag was set keeps working
		// through metadata updates; its loop refuses to run it.
		errs = append(errs, s.validateIdentity(cc)...)
	}
	return errs
}

// WarningsOnUpdate also names the revisions the update dropped from
// status.history for its size: PrepareForUpdate, which a fleet preview
// runs too, has no warnings to give.
func (s strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	cc, oldCC := obj.(*metacontroller.CompositeController), old.(*metacontroller.CompositeController)
	warnings := append(legacyShapeWarnings(cc), validation.Warnings(cc, expressions)...)
	if !apiequality.Semantic.DeepEqual(cc.Spec, oldCC.Spec) {
		_, _, dropped := updateRevisions(cc, oldCC)
		warnings = append(warnings, controllerregistry.TrimWarnings(dropped)...)
		if s.rightsWarnings != nil {
			warnings = append(warnings, s.rightsWarnings(ctx, cc)...)
		}
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

// statusStrategy is how the status subresource updates an object: the
// controller owns the status, and nothing else changes through it.
type statusStrategy struct {
	strategy
	controllerregistry.Status
}

var _ rest.RESTUpdateStrategy = statusStrategy{}

// NewStatusStrategy returns the strategy of compositecontrollers/status.
func NewStatusStrategy(s strategy) statusStrategy {
	return statusStrategy{strategy: s}
}

// PrepareForUpdate keeps everything but the status as stored, and of the
// status what only the server records.
func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newCC := obj.(*metacontroller.CompositeController)
	oldCC := old.(*metacontroller.CompositeController)
	newCC.Spec = oldCC.Spec
	controllerregistry.KeepMetadata(&newCC.ObjectMeta, &oldCC.ObjectMeta)
	// The author and the revisions are the spec's: a status writer
	// cannot choose them.
	newCC.Status.Author = oldCC.Status.Author
	newCC.Status.Revision, newCC.Status.History = oldCC.Status.Revision, oldCC.Status.History
	newCC.Status.Rollout = s.authors.StatusRollout(ctx, newCC.Status.Rollout, oldCC.Status.Rollout)
}

// revisions number a CompositeController's specs and keep its history.
var revisions = controllerregistry.Revisions[metacontroller.CompositeControllerSpec, metacontroller.CompositeControllerRevision]{
	Strip: func(s metacontroller.CompositeControllerSpec) metacontroller.CompositeControllerSpec {
		s.Rollout, s.RevisionHistoryLimit = nil, nil
		return s
	},
	Entry: func(r metacontroller.RevisionRecord, s metacontroller.CompositeControllerSpec) metacontroller.CompositeControllerRevision {
		return metacontroller.CompositeControllerRevision{RevisionRecord: r, Spec: s}
	},
	Record: func(e metacontroller.CompositeControllerRevision) metacontroller.RevisionRecord {
		return e.RevisionRecord
	},
	Spec: func(e metacontroller.CompositeControllerRevision) metacontroller.CompositeControllerSpec {
		return e.Spec
	},
	Rollout: func(s metacontroller.CompositeControllerSpec) *metacontroller.ControllerRollout {
		return s.Rollout
	},
}

func (statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateCompositeControllerStatusUpdate(obj.(*metacontroller.CompositeController), old.(*metacontroller.CompositeController))
}

// WarningsOnUpdate has nothing to say: the spec cannot change here.
func (statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}
