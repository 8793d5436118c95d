// Package fieldowner decides whether server-side applying a desired child
// would change the live one, the way the API server decides it: with
// structured-merge-diff, the target cluster's OpenAPI schema and the
// child's managedFields. Unlike a value diff it sees the fields a field
// manager stops setting (the apply removes them) and ignores fields other
// managers own. It also takes children over from Metacontroller, so that
// the fields Metacontroller set are pruned like ours once the hook stops
// returning them. And it tells what such an apply would store
// (WouldStore), so that a preview needs no dry-run request per child.
package fieldowner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// ErrSchema marks errors of objects that do not fit the schema of their
// kind (unknown field, wrong type, duplicate list key). Callers can retry
// with the deduced converter (Schemas.Compare does) and should log it: the
// API server will most likely reject the apply for the same reason.
var ErrSchema = errors.New("object does not fit its schema")

// Result is what server-side applying a desired object would do to the
// live one.
type Result struct {
	// Changed tells whether the apply would write to the object: a value
	// changes, a field is removed, or the set of fields the manager owns
	// changes. It is false for a converged child: the API server turns such
	// an apply into a no-op, so there is nothing to send.
	Changed bool
	// Lines describe the values the apply changes, one per field, sorted,
	// in internal/diffline's format: `data.color: "blue" -> "green"`,
	// `metadata.labels["a.b/c"]: <none> -> "x"`, and `- data.b: "x"` for a
	// field the apply removes. An element of a keyed list is one line:
	// `- spec.ports[port=81,protocol="TCP"]: {...}`. Values are JSON.
	Lines []string
	// Ownership describes the changes of ownership that come with no
	// change of value, sorted: `data.color: "blue" (adopt)` for a field the
	// manager takes over as it is (an adopted child, a field another
	// manager set to the same value), `metadata.labels.team: "a" (release)`
	// for a field the manager no longer sets that stays because another
	// manager owns it too. They make Changed true (the API server records
	// the new owners) but change no value.
	Ownership []string
	// Fallback is set, by Schemas.Compare only, when the comparison used
	// the deduced converter instead of the cluster's schema, and says why.
	// Lists are then compared whole. Worth logging, not failing.
	Fallback string
}

// Compare tells whether server-side applying desired under manager, with
// force, would change observed, and how.
//
// desired is what we send: the hook's object with our ownerReference. It
// is compared through Sanitize, so send Sanitize(desired) for the
// comparison to be exact. observed is the live object as an informer
// returns it, managedFields included (without them every child looks
// unowned and changed); nil means the child does not exist, which is
// always a change. Both must be of the same apiVersion and kind, the one tc
// knows. Status is never compared: a parent never writes its children's
// status.
//
// How: rather than diff values by hand, Compare runs the apply the way the
// API server does, with the same structured-merge-diff Updater that
// managedfields.FieldManager calls (merge.Updater.Apply: merge, then prune
// the fields manager owned and no longer applies unless another manager
// owns them, then update everyone's ownership), on the typed values of the
// objects and the decoded managedFields. It then compares the merged
// object with the live one, and manager's new field set with its old one.
// That is the server's own rule: an apply writes iff the object or its
// managedFields change (timestamps aside). Running the Updater rather than
// a whole managedfields.FieldManager avoids needing a converter, defaulter
// and creater for unstructured built-in types and timestamps to ignore,
// and gives the changed fields directly; the wrappers it skips are
// reproduced where they matter (manager identifiers, metadata fields never
// owned, the "before-first-apply" manager of objects without
// managedFields). Extracting what manager owns and comparing it with
// desired by hand (typed.Compare) would have to re-implement pruning: what
// is removed depends on the other managers, list items and their keys.
//
// What the server does after the merge, defaulting, admission, conversion
// to the stored form, is not reproduced, except where it would keep a
// converged child looking changed forever: empty maps and lists that
// built-in types drop (withoutEmpty), quantities the server rewrites in
// canonical form (withoutSameQuantities), a Secret's stringData
// (convertLikeServer). So a field the apply removes that the server
// defaults again (say a Service's sessionAffinity) shows as removed
// although its value stays; the apply still writes, as manager's ownership
// changes, and is not needed again. Defaulting or admission that rewrite
// what we set (a default inside an atomic list, tolerations appended to
// ours, a policy overriding a label) are not seen either: the child
// compares changed on every sync. CompareDryRun compares with the server's
// answer to a dry run instead, which sees them; the engine asks it
// whenever Compare finds a change.
func Compare(tc managedfields.TypeConverter, observed, desired *unstructured.Unstructured, manager string) (Result, error) {
	if desired == nil {
		return Result{}, errors.New("can't compare: no desired object")
	}
	a, err := runApply(tc, observed, desired, manager)
	if err != nil {
		return Result{}, err
	}
	live, merged := a.live, a.merged
	before := fieldpath.NewSet()
	var beforeVersion fieldpath.APIVersion
	if vs, ok := a.managers[a.ours]; ok {
		before, beforeVersion = vs.Set(), vs.APIVersion()
	}
	now := fieldpath.NewSet()
	if vs, ok := a.after[a.ours]; ok {
		now = vs.Set()
	}

	versionChange := ""
	if !before.Empty() && !now.Empty() && beforeVersion != a.version {
		versionChange = fmt.Sprintf("managedFields: apiVersion %q -> %q", beforeVersion, a.version)
	}
	r, err := changes(live, merged, before, now, versionChange)
	if err != nil {
		return Result{}, fmt.Errorf("can't compare %s: %w", a.name(), err)
	}
	return r, nil
}

// changes is the Result of a write that turns live into merged and the
// applier's fields from before into now; versionChange, when not empty,
// is an Ownership line saying that its entry's apiVersion changes.
func changes(live, merged *typed.TypedValue, before, now *fieldpath.Set, versionChange string) (Result, error) {
	cmp, err := live.Compare(merged)
	if err != nil {
		return Result{}, err
	}
	oldObj, newObj := live.AsValue().Unstructured(), merged.AsValue().Unstructured()
	var r Result
	r.Lines = append(r.Lines, describeSet(cmp.Removed, func(p fieldpath.Path) string {
		return "- " + formatPath(p) + ": " + renderAt(oldObj, p)
	})...)
	changed := withoutSameQuantities(cmp.Modified, live, oldObj, newObj).Union(withoutEmpty(cmp.Added, newObj))
	r.Lines = append(r.Lines, describeSet(changed, func(p fieldpath.Path) string {
		return formatPath(p) + ": " + renderAt(oldObj, p) + " -> " + renderAt(newObj, p)
	})...)
	r.Ownership = append(r.Ownership, describeSet(now.Difference(before).Difference(changed), func(p fieldpath.Path) string {
		return formatPath(p) + ": " + renderAt(newObj, p) + " (adopt)"
	})...)
	r.Ownership = append(r.Ownership, describeSet(before.Difference(now).Difference(cmp.Removed), func(p fieldpath.Path) string {
		return formatPath(p) + ": " + renderAt(newObj, p) + " (release)"
	})...)
	if versionChange != "" {
		r.Ownership = append(r.Ownership, versionChange)
	}
	sort.Strings(r.Lines)
	sort.Strings(r.Ownership)
	r.Changed = len(r.Lines) > 0 || len(r.Ownership) > 0 || !before.Equals(now)
	return r, nil
}

// applyRun is one server-side apply as the API server's field manager runs
// it, before anything is stored: what Compare compares and WouldStore
// returns.
type applyRun struct {
	// desired is the object applied, which errors name (describeObject
	// only then: it costs every child of every sync otherwise).
	desired *unstructured.Unstructured
	// version is the apiVersion applied.
	version fieldpath.APIVersion
	// live is the object before the apply (empty for a create), merged
	// the object after it: live itself when the apply changes no value.
	live, merged *typed.TypedValue
	// written is whether the Updater found a changed value, which is when
	// the API server stamps the manager's entry with the time.
	written bool
	// managers are the field sets before the apply, those of
	// "before-first-apply" included (firstApply names it then), and after
	// the fields the apply changes ownership of, ours stripped of the
	// metadata the server never records.
	managers, after fieldpath.ManagedFields
	// entries are observed's managedFields by manager identifier.
	entries map[string]metav1.ManagedFieldsEntry
	// ours and firstApply are the manager identifiers of the applier and,
	// when one was recorded, "before-first-apply"; firstApply is "" else.
	ours, firstApply string
}

// name describes the object applied, for errors.
func (a *applyRun) name() string { return describeObject(a.desired) }

// runApply runs the API server's apply of desired (Sanitized) under manager,
// with force, on observed (nil: a create). See Compare for how.
func runApply(tc managedfields.TypeConverter, observed, desired *unstructured.Unstructured, manager string) (*applyRun, error) {
	applied := sanitizeShared(desired)
	a := &applyRun{desired: desired}
	if observed != nil && observed.GroupVersionKind() != applied.GroupVersionKind() {
		return nil, fmt.Errorf("can't compare %s: observed as %s, desired as %s", a.name(), observed.GroupVersionKind(), applied.GroupVersionKind())
	}
	config, err := tc.ObjectToTyped(applied)
	if err != nil {
		return nil, fmt.Errorf("can't convert desired %s: %w: %w", a.name(), ErrSchema, err)
	}
	empty, err := emptyTyped(tc, applied)
	if err != nil {
		return nil, err
	}
	live := empty
	managers := fieldpath.ManagedFields{}
	if observed != nil {
		live, err = tc.ObjectToTyped(sanitizeLive(observed), typed.AllowDuplicates)
		if err != nil {
			return nil, fmt.Errorf("can't convert observed %s: %w: %w", a.name(), ErrSchema, err)
		}
		if managers, a.entries, err = decodeManagedFields(observed.GetManagedFields()); err != nil {
			return nil, fmt.Errorf("can't read the managedFields of %s: %w", a.name(), err)
		}
	}
	a.version = fieldpath.APIVersion(applied.GetAPIVersion())
	updater := merge.Updater{Converter: sameShape{}}
	if observed != nil && len(managers) == 0 {
		// Like the API server: the fields of an object without
		// managedFields belong to "before-first-apply", so that the first
		// apply does not prune what others set.
		id, err := managerID(metav1.ManagedFieldsEntry{Manager: "before-first-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: string(a.version)})
		if err != nil {
			return nil, err
		}
		if _, managers, err = updater.Update(empty, live, a.version, managers, id); err != nil {
			return nil, fmt.Errorf("can't record the fields of %s: %w", a.name(), err)
		}
		stripMeta(managers, id)
		if _, ok := managers[id]; ok {
			a.firstApply = id
		}
	}

	if a.ours, err = applierID(manager); err != nil {
		return nil, err
	}
	var merged *typed.TypedValue
	var after fieldpath.ManagedFields
	if observed == nil {
		merged, after, err = applyToNothing(empty, config, a.version, a.ours)
	} else {
		merged, after, err = updater.Apply(live, config, a.version, managers.Copy(), a.ours, true)
	}
	if err != nil {
		return nil, fmt.Errorf("can't merge desired %s: %w", a.name(), err)
	}
	if merged == nil {
		merged = live // The Updater's way of saying "no change".
	} else if merged, err = convertLikeServer(tc, merged); err != nil {
		return nil, fmt.Errorf("can't convert merged %s: %w", a.name(), err)
	} else {
		a.written = true
	}
	stripMeta(after, a.ours)
	a.live, a.merged, a.managers, a.after = live, merged, managers, after
	return a, nil
}

// applyToNothing is what merge.Updater.Apply answers for an object that
// does not exist yet, without the walks that would find it out: merged
// into the empty object a configuration stays itself, nothing is pruned
// (manager owned nothing) and nobody else owns a field to take, so manager
// owns exactly the configuration's fields. Like the Updater it returns a
// nil object when nothing changes, i.e. for an empty configuration. A
// preview applies mostly new children, at a third of the cost this way;
// TestApplyToNothingIsTheUpdaters holds both to the same answers.
func applyToNothing(empty, config *typed.TypedValue, version fieldpath.APIVersion, manager string) (*typed.TypedValue, fieldpath.ManagedFields, error) {
	set, err := config.ToFieldSet()
	if err != nil {
		return nil, nil, err
	}
	managers := fieldpath.ManagedFields{}
	if !set.Empty() {
		managers[manager] = fieldpath.NewVersionedSet(set, version, true)
	}
	if value.Equals(empty.AsValue(), config.AsValue()) {
		return nil, managers, nil
	}
	return config, managers, nil
}

// Sanitize returns a copy of a desired child without what an applied
// configuration must not or need not carry: status (a parent never writes
// its children's status; on kinds with a status subresource the API server
// ignores it anyway) and the metadata the system sets (resourceVersion,
// uid and the like, which a hook echoing an observed child returns and
// which in an apply would be preconditions or errors). Whole floats become
// integers, as they do on the wire (JSON has one number type), so that 3.0
// from a hook equals the 3 the API server stores. Compare compares this;
// apply it too.
func Sanitize(desired *unstructured.Unstructured) *unstructured.Unstructured {
	c := desired.DeepCopy()
	SanitizeInPlace(c)
	return c
}

// SanitizeInPlace is Sanitize on an object of the caller's own, a copy
// already: it spares every child of every sync a second deep copy.
func SanitizeInPlace(obj *unstructured.Unstructured) {
	unstructured.RemoveNestedField(obj.Object, "status")
	if md, ok := obj.Object["metadata"].(map[string]interface{}); ok {
		for _, f := range systemMeta {
			delete(md, f)
		}
	}
	normaliseNumbers(obj.Object)
}

// sanitizeShared is Sanitize(desired) without the deep copy when Sanitize
// would change nothing below the top level and metadata, which is the rule
// (the engine's desired children are sanitized already): those two maps
// are copied, and everything under them is shared with desired. Apply and
// compare only read it, and WouldStore writes only those two maps of its
// result. The deep copy was the largest single allocation of a preview.
// Where numbers need normalising, or a value is not one of JSON's (which
// DeepCopy refuses), it is Sanitize itself.
func sanitizeShared(desired *unstructured.Unstructured) *unstructured.Unstructured {
	if !sanitized(desired.Object) {
		return Sanitize(desired)
	}
	obj := make(map[string]interface{}, len(desired.Object))
	for k, v := range desired.Object {
		obj[k] = v
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]interface{}); ok {
		m := make(map[string]interface{}, len(md))
		for k, v := range md {
			m[k] = v
		}
		for _, f := range systemMeta {
			delete(m, f)
		}
		obj["metadata"] = m
	}
	return &unstructured.Unstructured{Object: obj}
}

// sanitized tells whether v holds only values that DeepCopyJSONValue
// copies and normaliseNumbers leaves as they are.
func sanitized(v interface{}) bool {
	switch t := v.(type) {
	case map[string]interface{}:
		for _, e := range t {
			if !sanitized(e) {
				return false
			}
		}
		return true
	case []interface{}:
		for _, e := range t {
			if !sanitized(e) {
				return false
			}
		}
		return true
	case nil, string, int64, bool, json.Number:
		return true
	case float64:
		return !(t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64)
	default:
		return false
	}
}

// systemMeta are the fields of ObjectMeta the system sets.
var systemMeta = []string{"managedFields", "resourceVersion", "uid", "selfLink", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"}

// sanitizeLive drops from a live object what Compare never compares, so
// that it neither shows as a change nor costs a conversion.
func sanitizeLive(observed *unstructured.Unstructured) *unstructured.Unstructured {
	c := observed.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	normaliseNumbers(c.Object)
	return c
}

// normaliseNumbers turns whole float64s into int64s in place, as a JSON
// round trip through the API server's decoder does.
func normaliseNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		// Only a number is stored back: a map or a slice is normalised
		// where it is, and storing every value back cost a map assignment
		// for each field of each child of each sync.
		for k, e := range t {
			switch e.(type) {
			case map[string]interface{}, []interface{}:
				normaliseNumbers(e)
			case float64, float32, int, int32:
				t[k] = normaliseNumbers(e)
			}
		}
	case []interface{}:
		for i, e := range t {
			t[i] = normaliseNumbers(e)
		}
	case float64:
		if t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64 {
			return int64(t)
		}
	case float32:
		return normaliseNumbers(float64(t))
	case int:
		return int64(t)
	case int32:
		return int64(t)
	}
	return v
}

// convertLikeServer does to a merged object what the API server's
// conversion of a built-in type does before it stores it, where that
// changes fields: a Secret's stringData is written into data and never
// stored, so without this a Secret with stringData would never compare
// converged.
func convertLikeServer(tc managedfields.TypeConverter, merged *typed.TypedValue) (*typed.TypedValue, error) {
	obj, ok := merged.AsValue().Unstructured().(map[string]interface{})
	if !ok || obj["apiVersion"] != "v1" || obj["kind"] != "Secret" {
		return merged, nil
	}
	stringData, ok := obj["stringData"].(map[string]interface{})
	if !ok {
		return merged, nil
	}
	u := (&unstructured.Unstructured{Object: obj}).DeepCopy()
	data, _ := u.Object["data"].(map[string]interface{})
	if data == nil {
		data = map[string]interface{}{}
	}
	for k, v := range stringData {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	u.Object["data"] = data
	delete(u.Object, "stringData")
	return tc.ObjectToTyped(u, typed.AllowDuplicates)
}

// withoutEmpty drops from added the fields whose new value is null or an
// empty map or list. Built-in types drop empty values when they are stored
// (omitempty), so a hook that returns, say, `data: {}` would never see its
// ConfigMap converge; the API server does not write for them either, as
// the stored object would not change. Asking for null where nothing is set
// is no change either.
func withoutEmpty(added *fieldpath.Set, obj interface{}) *fieldpath.Set {
	out := fieldpath.NewSet()
	added.Iterate(func(p fieldpath.Path) {
		v, _ := valueAt(obj, p)
		switch t := v.(type) {
		case nil:
			return
		case map[string]interface{}:
			if len(t) == 0 {
				return
			}
		case []interface{}:
			if len(t) == 0 {
				return
			}
		}
		out.Insert(p.Copy())
	})
	return out
}

// quantityType is the schema of resource.Quantity in built-in types.
const quantityType = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// withoutSameQuantities drops from modified the quantities (resource
// requests and limits, mostly) that change notation but not value: a hook
// asks for cpu "0.5", the API server stores the canonical "500m", and the
// next apply of "0.5" is a no-op for it. Only fields the schema types as
// resource.Quantity are concerned, so a string in a ConfigMap that
// happens to look like a quantity still compares as a string.
func withoutSameQuantities(modified *fieldpath.Set, tv *typed.TypedValue, oldObj, newObj interface{}) *fieldpath.Set {
	out := fieldpath.NewSet()
	modified.Iterate(func(p fieldpath.Path) {
		if tr, ok := typeAt(tv.Schema(), tv.TypeRef(), p); ok && tr.NamedType != nil && *tr.NamedType == quantityType {
			was, _ := valueAt(oldObj, p)
			is, _ := valueAt(newObj, p)
			if a, ok := toQuantity(was); ok {
				if b, ok := toQuantity(is); ok && a.Cmp(b) == 0 {
					return
				}
			}
		}
		out.Insert(p.Copy())
	})
	return out
}

// typeAt is the type of the field at p.
func typeAt(s *smdschema.Schema, tr smdschema.TypeRef, p fieldpath.Path) (smdschema.TypeRef, bool) {
	for _, pe := range p {
		a, ok := s.Resolve(tr)
		if !ok {
			return tr, false
		}
		switch {
		case pe.FieldName != nil && a.Map != nil:
			if f, ok := a.Map.FindField(*pe.FieldName); ok {
				tr = f.Type
			} else {
				tr = a.Map.ElementType
			}
		case pe.FieldName == nil && a.List != nil:
			tr = a.List.ElementType
		default:
			return tr, false
		}
	}
	return tr, true
}

func toQuantity(v interface{}) (resource.Quantity, bool) {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case int64:
		s = strconv.FormatInt(t, 10)
	case float64:
		s = strconv.FormatFloat(t, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// emptyTyped is the object before it exists, of the kind of obj.
func emptyTyped(tc managedfields.TypeConverter, obj *unstructured.Unstructured) (*typed.TypedValue, error) {
	empty := &unstructured.Unstructured{Object: map[string]interface{}{}}
	empty.SetGroupVersionKind(obj.GroupVersionKind())
	tv, err := tc.ObjectToTyped(empty)
	if err != nil {
		return nil, fmt.Errorf("can't convert an empty %s: %w: %w", obj.GroupVersionKind(), ErrSchema, err)
	}
	return tv, nil
}

// sameShape is the Updater's version converter. A TypeConverter here knows
// one version, so managers that wrote at another version of the kind (a
// CRD's v1alpha1, say) are compared as if fields had the same paths in
// every version, which is nearly always true. The API server converts for
// real; where paths did change between versions, Compare may misreport
// which fields the apply prunes.
type sameShape struct{}

func (sameShape) Convert(v *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return v, nil
}

func (sameShape) IsMissingVersionError(error) bool { return false }

// neverOwned are the fields the API server keeps out of every manager's
// set (managedfields' stripMetaManager).
var neverOwned = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

func stripMeta(managers fieldpath.ManagedFields, id string) {
	vs, ok := managers[id]
	if !ok {
		return
	}
	s := vs.Set().Difference(neverOwned)
	if s.Empty() {
		delete(managers, id)
		return
	}
	managers[id] = fieldpath.NewVersionedSet(s, vs.APIVersion(), vs.Applied())
}

// managerID is how the API server names a manager in a
// fieldpath.ManagedFields (managedfields' BuildManagerIdentifier): the
// entry without its fields and time, and without apiVersion for appliers,
// so that an applier is one manager whatever version it applies.
func managerID(e metav1.ManagedFieldsEntry) (string, error) {
	e.FieldsType, e.FieldsV1, e.Time = "", nil, nil
	if e.Operation == metav1.ManagedFieldsOperationApply {
		e.APIVersion = ""
	}
	b, err := json.Marshal(&e)
	if err != nil {
		return "", fmt.Errorf("can't name manager %q: %w", e.Manager, err)
	}
	return string(b), nil
}

// applierIDs memoizes applierID: every child of every sync names its
// controller's manager, and the JSON encoding of the entry would cost each
// of them as much as a tenth of its merge. There are as many keys as
// CompositeControllers.
var applierIDs sync.Map

// applierID is managerID of manager's Apply entry.
func applierID(manager string) (string, error) {
	if id, ok := applierIDs.Load(manager); ok {
		return id.(string), nil
	}
	id, err := managerID(metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply})
	if err != nil {
		return "", err
	}
	applierIDs.Store(manager, id)
	return id, nil
}

// decodeManagedFields reads managedFields as the API server does: the
// field sets by manager identifier, and the entries they come from.
func decodeManagedFields(entries []metav1.ManagedFieldsEntry) (fieldpath.ManagedFields, map[string]metav1.ManagedFieldsEntry, error) {
	managers := make(fieldpath.ManagedFields, len(entries))
	byID := make(map[string]metav1.ManagedFieldsEntry, len(entries))
	for _, e := range entries {
		id, err := managerID(e)
		if err != nil {
			return nil, nil, err
		}
		set, err := decodeSet(e)
		if err != nil {
			return nil, nil, err
		}
		managers[id] = fieldpath.NewVersionedSet(set, fieldpath.APIVersion(e.APIVersion), e.Operation == metav1.ManagedFieldsOperationApply)
		byID[id] = e
	}
	return managers, byID, nil
}

func decodeSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	if e.FieldsType != "FieldsV1" {
		return nil, fmt.Errorf("can't read the fields of manager %q: type %q, want FieldsV1", e.Manager, e.FieldsType)
	}
	set := &fieldpath.Set{}
	if e.FieldsV1 != nil {
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("can't read the fields of manager %q: %w", e.Manager, err)
		}
	}
	return set, nil
}

func describeObject(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + cache.MetaObjectToName(obj).String()
}
