package parentloop

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// The loop's event filters, each a named predicate as controller-runtime's
// predicate package has them (GenerationChangedPredicate,
// LabelChangedPredicate, AnnotationChangedPredicate, And/Or): which parent
// events queue the parent.

// updatePredicate tells whether a parent's update from old to cur is one
// the loop syncs the parent for.
type updatePredicate func(old, cur *unstructured.Unstructured) bool

func anyUpdate(_, _ *unstructured.Unstructured) bool { return true }

func generationChanged(old, cur *unstructured.Unstructured) bool {
	return old.GetGeneration() != cur.GetGeneration()
}

func labelsChanged(old, cur *unstructured.Unstructured) bool {
	return !reflect.DeepEqual(old.GetLabels(), cur.GetLabels())
}

func annotationsChanged(old, cur *unstructured.Unstructured) bool {
	return !reflect.DeepEqual(old.GetAnnotations(), cur.GetAnnotations())
}

// deletionBegun: cur is being deleted (a built-in kind's data has no
// generation to say so).
func deletionBegun(_, cur *unstructured.Unstructured) bool {
	return cur.GetDeletionTimestamp() != nil
}

// notOnlyStatusChanged: the two versions differ in more than status and
// bookkeeping metadata.
func notOnlyStatusChanged(old, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]interface{} {
		c := u.DeepCopy().Object
		delete(c, "status")
		if m, ok := c["metadata"].(map[string]interface{}); ok {
			delete(m, "resourceVersion")
			delete(m, "managedFields")
		}
		return c
	}
	return !equality.Semantic.DeepEqual(strip(old), strip(cur))
}

func or(predicates ...updatePredicate) updatePredicate {
	return func(old, cur *unstructured.Unstructured) bool {
		for _, p := range predicates {
			if p(old, cur) {
				return true
			}
		}
		return false
	}
}

// updatesOf is the predicate of def's parent updates. Without
// ignoreStatusChanges every update counts; with it, a CompositeController
// ignores a change of status alone, and a DecoratorController, as
// Metacontroller's, any change that leaves the generation, labels and
// annotations as they were and does not delete the object.
func updatesOf(def *definition.Definition) updatePredicate {
	switch {
	case !def.IgnoreStatusChanges:
		return anyUpdate
	case def.Kind == definition.KindDecorator:
		return or(generationChanged, labelsChanged, annotationsChanged, deletionBegun)
	default:
		return notOnlyStatusChanged
	}
}

// selectedOrFinalizing tells whether def's loop syncs the parent u on its
// creation, deletion or a resync: one that matches the label selector, or
// that carries the finalizer and so still needs its finalize hook.
func selectedOrFinalizing(def *definition.Definition, u *unstructured.Unstructured) bool {
	return def.Selects(u) || definition.HasFinalizer(u, def.Finalizer)
}
