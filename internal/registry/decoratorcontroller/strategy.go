// Package decoratorcontroller is the registry of DecoratorControllers: how
// they are created, updated, validated, stored and printed. What it shares
// with the CompositeController registry is in internal/registry/controllerregistry.
package decoratorcontroller

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/apicheck"
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
	rightsWarnings func(ctx context.Context, dc runtime.Object) []string
	// destinations are the address ranges hooks may not be called at.
	destinations hooks.Destinations
	// mayAuthor tells whether the request's user passes the author checks
	// of a controller; nil without a target cluster.
	mayAuthor func(ctx context.Context, dc runtime.Object) bool
	// authors decides who becomes the author of what a request writes.
	authors controllerregistry.Authors
	// identityRequired refuses a controller that names no ServiceAccount.
	identityRequired bool
	// healthCost checks a new health condition against the schemas of
	// the decorated resources; nil without a target cluster.
	healthCost controllerregistry.HealthCheck
}

var (
	_ rest.RESTCreateUpdateStrategy = strategy{}
	_ rest.ResetFieldsStrategy      = strategy{}
	_ rest.RESTDeleteStrategy       = strategy{}
)

// NewStrategy returns the strategy of the decoratorcontrollers resource.
func NewStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

// PrepareForCreate clears the status, which only the controller may write,
// records the request's user as the author, starts the generation at 1 and
// stamps a resume with the server's time.
func (s strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	dc := obj.(*metacontroller.DecoratorController)
	dc.Status = metacontroller.DecoratorControllerStatus{Author: s.authors.Of(ctx), Revision: 1}
	dc.Generation = 1
	controllerregistry.StampResume(&dc.ObjectMeta, nil)
}

// PrepareForUpdate keeps the stored status and bumps the generation when,
// and only when, the spec changed; whoever changes the spec becomes its
// author, and a resume it requests carries the server's time, as for
// CompositeControllers.
func (s strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newDC := obj.(*metacontroller.DecoratorController)
	oldDC := old.(*metacontroller.DecoratorController)
	newDC.Status = oldDC.Status
	controllerregistry.StampResume(&newDC.ObjectMeta, &oldDC.ObjectMeta)
	switch {
	case specChanged(newDC, oldDC):
		newDC.Generation = oldDC.Generation + 1
		if !revisions.SameRevision(oldDC.Spec, newDC.Spec) {
			// A change of the rollout alone (kubectl composite rollout
			// pause) runs nothing new: the revision keeps its author.
			newDC.Status.Author = s.authors.Of(ctx)
		}
		newDC.Status.Revision, newDC.Status.History, _ = updateRevisions(newDC, oldDC)
	case oldDC.Status.Author == nil:
		if author := s.authors.Of(ctx); author != nil && (s.mayAuthor == nil || s.mayAuthor(ctx, newDC)) {
			newDC.Status.Author = author
		}
	}
}

// updateRevisions numbers newDC's spec, replacing oldDC's, and keeps its
// history; dropped are the revisions the history's size dropped.
func updateRevisions(newDC, oldDC *metacontroller.DecoratorController) (int64, []metacontroller.DecoratorControllerRevision, []int64) {
	return revisions.Update(oldDC.Spec, newDC.Spec, oldDC.Status.Revision, oldDC.Status.Author,
		oldDC.Status.History, oldDC.Status.Rollout, controllerregistry.HistoryLimit(newDC.Spec.RevisionHistoryLimit))
}

func (s strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	dc := obj.(*metacontroller.DecoratorController)
	errs := append(validation.ValidateDecoratorController(dc, expressions), s.validateDestinations(dc)...)
	errs = append(errs, s.healthCost.Validate(ctx, dc, nil)...)
	return append(errs, controllerregistry.ValidateIdentity(s.identityRequired, dc.Spec.ServiceAccount)...)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	dc, oldDC := obj.(*metacontroller.DecoratorController), old.(*metacontroller.DecoratorController)
	errs := append(validation.ValidateDecoratorControllerUpdate(dc, oldDC, expressions), s.validateDestinations(dc)...)
	errs = append(errs, s.healthCost.Validate(ctx, dc, oldDC)...)
	if specChanged(dc, oldDC) {
		errs = append(errs, controllerregistry.ValidateIdentity(s.identityRequired, dc.Spec.ServiceAccount)...)
	}
	return errs
}

func (s strategy) validateDestinations(dc *metacontroller.DecoratorController) field.ErrorList {
	h := dc.Spec.Hooks
	if h == nil {
		return nil
	}
	return controllerregistry.ValidateHookDestinations(s.destinations, field.NewPath("spec", "hooks"),
		[]controllerregistry.NamedHook{{Name: "sync", Hook: h.Sync}, {Name: "finalize", Hook: h.Finalize}, {Name: "customize", Hook: h.Customize}})
}

func (s strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	warnings := validation.DecoratorWarnings(obj.(*metacontroller.DecoratorController))
	if s.rightsWarnings != nil {
		warnings = append(warnings, s.rightsWarnings(ctx, obj)...)
	}
	return warnings
}

// WarningsOnUpdate also names the revisions the update dropped from
// status.history for its size: PrepareForUpdate, which a fleet preview
// runs too, has no warnings to give.
func (s strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	dc, oldDC := obj.(*metacontroller.DecoratorController), old.(*metacontroller.DecoratorController)
	warnings := validation.DecoratorWarnings(dc)
	if specChanged(dc, oldDC) {
		_, _, dropped := updateRevisions(dc, oldDC)
		warnings = append(warnings, controllerregistry.TrimWarnings(dropped)...)
		if s.rightsWarnings != nil {
			warnings = append(warnings, s.rightsWarnings(ctx, obj)...)
		}
	}
	return warnings
}

func specChanged(newDC, oldDC *metacontroller.DecoratorController) bool {
	return !apiequality.Semantic.DeepEqual(newDC.Spec, oldDC.Spec)
}

// statusStrategy is how the status subresource updates an object: the
// controller owns the status, and nothing else changes through it.
type statusStrategy struct {
	strategy
	controllerregistry.Status
}

var _ rest.RESTUpdateStrategy = statusStrategy{}

// PrepareForUpdate keeps everything but the status as stored, and of the
// status what only the server records.
func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newDC := obj.(*metacontroller.DecoratorController)
	oldDC := old.(*metacontroller.DecoratorController)
	newDC.Spec = oldDC.Spec
	controllerregistry.KeepMetadata(&newDC.ObjectMeta, &oldDC.ObjectMeta)
	// The author and the revisions are the spec's: a status writer
	// cannot choose them.
	newDC.Status.Author = oldDC.Status.Author
	newDC.Status.Revision, newDC.Status.History = oldDC.Status.Revision, oldDC.Status.History
	newDC.Status.Rollout = s.authors.StatusRollout(ctx, newDC.Status.Rollout, oldDC.Status.Rollout)
}

// expressions compiles a rollout's health condition as the loop does.
var expressions validation.Expressions = apicheck.Expressions{}

// revisions number a DecoratorController's specs and keep its history.
var revisions = controllerregistry.Revisions[metacontroller.DecoratorControllerSpec, metacontroller.DecoratorControllerRevision]{
	Strip: func(s metacontroller.DecoratorControllerSpec) metacontroller.DecoratorControllerSpec {
		s.Rollout, s.RevisionHistoryLimit = nil, nil
		return s
	},
	Entry: func(r metacontroller.RevisionRecord, s metacontroller.DecoratorControllerSpec) metacontroller.DecoratorControllerRevision {
		return metacontroller.DecoratorControllerRevision{RevisionRecord: r, Spec: s}
	},
	Record: func(e metacontroller.DecoratorControllerRevision) metacontroller.RevisionRecord {
		return e.RevisionRecord
	},
	Spec: func(e metacontroller.DecoratorControllerRevision) metacontroller.DecoratorControllerSpec {
		return e.Spec
	},
	Rollout: func(s metacontroller.DecoratorControllerSpec) *metacontroller.ControllerRollout {
		return s.Rollout
	},
}

func (statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDecoratorControllerStatusUpdate(obj.(*metacontroller.DecoratorController), old.(*metacontroller.DecoratorController))
}

// WarningsOnUpdate has nothing to say: the spec cannot change here.
func (statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}
