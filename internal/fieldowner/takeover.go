package fieldowner

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

const (
	// MetacontrollerManager is the field manager of Metacontroller's
	// writes to children: its default "dynamic-apply" strategy creates and
	// updates them with plain requests, which the API server records as
	// Update operations under the user agent's first word, "metacontroller"
	// (client-go's default user agent is the binary's name); its
	// "server-side-apply" strategy applies them as
	// --apply-strategy-ssa-field-manager, "metacontroller" by default.
	MetacontrollerManager = "metacontroller"
	// LastAppliedAnnotation is where Metacontroller's dynamic apply keeps
	// the last object the hook returned, for its three-way merge
	// (metacontroller's pkg/dynamic/apply).
	LastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"
)

// TakeoverPatch returns the JSON patch (RFC 6902) that hands a child last
// written by Metacontroller to manager: the fields the MetacontrollerManager
// entries of the main resource own, whatever their operation, move into
// manager's Apply entry, and LastAppliedAnnotation goes. Once it is
// applied manager is the owner of those fields, so its next apply prunes
// the ones the hook no longer returns, as Metacontroller would have. needed
// is false, with no patch, when the child has nothing of Metacontroller's.
//
// It differs from client-go's csaupgrade.UpgradeManagedFieldsPatch, which
// it otherwise follows (same patch shape, resourceVersion replaced so that
// a concurrent change makes it fail with a conflict instead of losing the
// change), in three ways:
//   - csaupgrade moves Update entries only. Metacontroller's
//     server-side-apply strategy leaves an Apply entry, whose fields are
//     as much Metacontroller's, so every operation is moved here.
//   - An Update entry owns more than Metacontroller set: the defaults the
//     API server filled in when Metacontroller created the child. Owning
//     them, manager would "remove" them on its next apply (and the server
//     default them again): harmless, but a write and noise in the plan. So
//     when the annotation is there, an Update entry's fields are cut down
//     to those of the annotation (what the hook returned last), converted
//     to field paths with tc, plus the ownerReferences Metacontroller adds. An Apply entry is moved whole: it holds what was
//     applied. (When the annotation can't be read, Update entries are
//     moved whole too.)
//   - With no Metacontroller entry but the annotation (managedFields
//     stripped or reset, or written before the API server tracked them),
//     the fields of the annotation that the child has are moved.
//
// The patch sets the whole managedFields (the API server takes them from
// an update that sets them), so apply it to the object it was made from:
// the resourceVersion in it makes sure of that. Every entry but
// Metacontroller's and manager's is written back as observed has it, so
// observed must have them all: Lean keeps them on such a child. Send it as
// a types.JSONPatchType patch of the main resource.
func TakeoverPatch(tc managedfields.TypeConverter, observed *unstructured.Unstructured, manager string) (patch []byte, needed bool, err error) {
	name := describeObject(observed)
	if manager == MetacontrollerManager {
		return nil, false, fmt.Errorf("can't take %s over: the manager is Metacontroller's", name)
	}
	if !fromMetacontroller(observed) {
		// Most children were never Metacontroller's: this runs for every
		// child of every sync, so say so without decoding managedFields.
		return nil, false, nil
	}
	lastApplied, hasAnnotation := observed.GetAnnotations()[LastAppliedAnnotation]
	var fromAnnotation *fieldpath.Set
	var annotationErr error
	if hasAnnotation {
		fromAnnotation, annotationErr = annotationFields(tc, observed, lastApplied)
	}

	t, err := metacontrollerEntries(observed, manager, fromAnnotation)
	if err != nil {
		return nil, false, fmt.Errorf("can't take %s over: %w", name, err)
	}
	if !t.found {
		if !hasAnnotation {
			return nil, false, nil
		}
		if annotationErr != nil {
			return nil, true, fmt.Errorf("can't take %s over: %w", name, annotationErr)
		}
		if err := t.takeAnnotated(tc, observed, fromAnnotation); err != nil {
			return nil, true, fmt.Errorf("can't take %s over: %w", name, err)
		}
	}
	kept, err := t.handOver(manager)
	if err != nil {
		return nil, false, fmt.Errorf("can't take %s over: %w", name, err)
	}
	if patch, err = takeoverOps(observed, kept, hasAnnotation); err != nil {
		return nil, true, fmt.Errorf("can't take %s over: %w", name, err)
	}
	return patch, true, nil
}

// takeover is what TakeoverPatch gathers from a child's managedFields.
type takeover struct {
	// kept are the entries written back: all but Metacontroller's on the
	// main resource.
	kept []metav1.ManagedFieldsEntry
	// ours is the index in kept of manager's Apply entry; -1 for none.
	ours int
	// taken are the fields that move to manager.
	taken *fieldpath.Set
	// found: Metacontroller has an entry on the main resource.
	found bool
	// apiVersion and when are those of Metacontroller's newest entry,
	// which the new entry takes.
	apiVersion string
	when       *metav1.Time
}

// metacontrollerEntries sorts observed's managedFields into those kept and
// the fields of Metacontroller's entries, an Update entry's cut down to
// fromAnnotation when it is known.
func metacontrollerEntries(observed *unstructured.Unstructured, manager string, fromAnnotation *fieldpath.Set) (*takeover, error) {
	t := &takeover{ours: -1, taken: fieldpath.NewSet()}
	for _, e := range observed.GetManagedFields() {
		if e.Subresource != "" {
			t.kept = append(t.kept, e)
			continue
		}
		if e.Manager != MetacontrollerManager {
			if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
				t.ours = len(t.kept)
			}
			t.kept = append(t.kept, e)
			continue
		}
		set, err := decodeSet(e)
		if err != nil {
			return nil, err
		}
		if e.Operation == metav1.ManagedFieldsOperationUpdate && fromAnnotation != nil {
			set = coveredFields(set, fromAnnotation)
		}
		t.taken = t.taken.Union(set)
		if !t.found || (e.Time != nil && (t.when == nil || t.when.Before(e.Time))) {
			// The newest entry's version and time are the new entry's.
			t.apiVersion, t.when = e.APIVersion, e.Time
		}
		t.found = true
	}
	return t, nil
}

// takeAnnotated takes, when Metacontroller has no entry, the fields of its
// annotation that the child has.
func (t *takeover) takeAnnotated(tc managedfields.TypeConverter, observed *unstructured.Unstructured, fromAnnotation *fieldpath.Set) error {
	live, err := tc.ObjectToTyped(sanitizeLive(observed), typed.AllowDuplicates)
	if err != nil {
		return fmt.Errorf("can't convert it: %w: %w", ErrSchema, err)
	}
	has, err := live.ToFieldSet()
	if err != nil {
		return err
	}
	t.taken = fromAnnotation.Intersection(has)
	t.apiVersion = observed.GetAPIVersion()
	return nil
}

// handOver adds the taken fields to manager's Apply entry, or a new one,
// and returns the entries to write.
func (t *takeover) handOver(manager string) ([]metav1.ManagedFieldsEntry, error) {
	// Never ours: status, the annotation that goes, what nobody owns.
	taken := t.taken.Difference(neverOwned).
		RecursiveDifference(fieldpath.NewSet(fieldpath.MakePathOrDie("status"))).
		Difference(fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "annotations", LastAppliedAnnotation)))
	kept := t.kept
	switch {
	case t.ours >= 0:
		set, err := decodeSet(kept[t.ours])
		if err != nil {
			return nil, err
		}
		if err := encodeSet(&kept[t.ours], set.Union(taken)); err != nil {
			return nil, err
		}
	case !taken.Empty():
		e := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: t.apiVersion, Time: t.when}
		if err := encodeSet(&e, taken); err != nil {
			return nil, err
		}
		kept = append(kept, e)
	}
	if kept == nil {
		// An empty list resets managedFields, as nothing is owned.
		kept = []metav1.ManagedFieldsEntry{}
	}
	return kept, nil
}

// takeoverOps is the JSON patch that writes kept as observed's
// managedFields and removes Metacontroller's annotation, if it has one.
func takeoverOps(observed *unstructured.Unstructured, kept []metav1.ManagedFieldsEntry, hasAnnotation bool) ([]byte, error) {
	ops := []map[string]interface{}{
		// "replace" of resourceVersion, not "test", so that a concurrent
		// change fails in storage with 409 Conflict, as in csaupgrade.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": observed.GetResourceVersion()},
		// "add" works whether managedFields are there or not.
		{"op": "add", "path": "/metadata/managedFields", "value": kept},
	}
	if hasAnnotation {
		ops = append(ops, map[string]interface{}{"op": "remove", "path": "/metadata/annotations/" + escapePointer(LastAppliedAnnotation)})
	}
	return json.Marshal(ops)
}

// annotationFields converts the object in Metacontroller's annotation to
// the set of fields it sets.
func annotationFields(tc managedfields.TypeConverter, observed *unstructured.Unstructured, lastApplied string) (*fieldpath.Set, error) {
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(lastApplied), &obj.Object); err != nil {
		return nil, fmt.Errorf("can't read the %s annotation: %w", LastAppliedAnnotation, err)
	}
	if obj.Object == nil {
		obj.Object = map[string]interface{}{}
	}
	// It is the hook's object, of the child's kind; typing it as the
	// observed version is what lets its paths match managedFields'.
	obj.SetGroupVersionKind(observed.GroupVersionKind())
	obj = Sanitize(obj)
	tv, err := tc.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("can't convert the %s annotation: %w: %w", LastAppliedAnnotation, ErrSchema, err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		return nil, fmt.Errorf("can't list the fields of the %s annotation: %w", LastAppliedAnnotation, err)
	}
	return set, nil
}

// coveredFields keeps the fields of an Update entry's set that Metacontroller
// set: those of the hook's object (within), including the fields under an
// atomic one of within's (a list, with the deduced converter), and the
// ownerReferences it adds to every child it creates. The rest are the
// defaults the API server filled in, and the "." markers of maps and
// lists created along with their fields, which an apply never owns.
func coveredFields(set, within *fieldpath.Set) *fieldpath.Set {
	leaves, setLeaves := within.Leaves(), set.Leaves()
	out := fieldpath.NewSet()
	set.Iterate(func(p fieldpath.Path) {
		// The ownerReferences' elements, or the list when it is atomic
		// (deduced), not the "." marker of a list with elements.
		ownerRefs := len(p) >= 2 && ownerReferences.Equals(p[:2]) && (len(p) > 2 || setLeaves.Has(p))
		if within.Has(p) || coveredBy(leaves, p) || ownerRefs {
			out.Insert(p.Copy())
		}
	})
	return out
}

var ownerReferences = fieldpath.MakePathOrDie("metadata", "ownerReferences")

func encodeSet(e *metav1.ManagedFieldsEntry, s *fieldpath.Set) error {
	raw, err := s.ToJSON()
	if err != nil {
		return fmt.Errorf("can't encode the fields of manager %q: %w", e.Manager, err)
	}
	e.FieldsType = "FieldsV1"
	e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return nil
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// fromMetacontroller tells whether obj may hold fields of Metacontroller's
// for TakeoverPatch to move: it has Metacontroller's entry in managedFields
// or its last-applied annotation.
func fromMetacontroller(obj *unstructured.Unstructured) bool {
	if _, ok, _ := unstructured.NestedString(obj.Object, "metadata", "annotations", LastAppliedAnnotation); ok {
		return true
	}
	return managedBy(obj, MetacontrollerManager)
}

// managedBy tells whether manager has an entry in obj's managedFields,
// reading the raw list.
func managedBy(obj *unstructured.Unstructured, manager string) bool {
	raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields")
	entries, _ := raw.([]interface{})
	for _, e := range entries {
		if m, ok := e.(map[string]interface{}); ok && m["manager"] == manager {
			return true
		}
	}
	return false
}
