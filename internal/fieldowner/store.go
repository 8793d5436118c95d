package fieldowner

import (
	"errors"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// WouldStore returns the object that server-side applying desired under
// manager, with force, would store in place of observed (nil: the object
// does not exist, the apply creates it). It is the merged object of the
// very apply Compare runs (same Updater, same pruning of the fields manager
// stops setting, same conversion of a Secret's stringData), with the
// managedFields the API server would record: manager's Apply entry with
// the fields it now owns, stamped with the time when a value changes;
// the other managers' entries without what the forced apply took from
// them; "before-first-apply" for an object that had no managedFields.
// observed's status is kept: an apply of the main resource does not write
// it.
//
// It is computed here, not by the API server, so what the server does
// after the merge is missing: no defaulting (a Service's type, a
// Deployment's strategy), no admission (mutating and validating webhooks,
// policies), no validation (an object the server would refuse still gives
// a result), no system metadata for a create (uid, creationTimestamp,
// resourceVersion; an update keeps observed's, generation not bumped), no
// cap of the number of update managers. Ask the server with a dry-run
// apply when those matter.
//
// desired and observed are as for Compare; neither is modified. The
// result's top level and metadata are its own, but values under them may
// be desired's (see sanitizeShared): treat them as read-only, or copy it.
func WouldStore(tc managedfields.TypeConverter, observed, desired *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	if desired == nil {
		return nil, errors.New("can't apply: no desired object")
	}
	a, err := runApply(tc, observed, desired, manager)
	if err != nil {
		return nil, err
	}
	obj, ok := a.merged.AsValue().Unstructured().(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("can't convert merged %s: not an object", a.name())
	}
	// obj is built from what runApply made of desired and observed
	// (merged, or live itself when nothing changes): its top level and
	// metadata are ours to edit, and nothing else is edited here.
	out := &unstructured.Unstructured{Object: obj}
	if observed != nil {
		if st, ok := observed.Object["status"]; ok {
			out.Object["status"] = runtime.DeepCopyJSONValue(st)
		}
	}
	entries, err := a.managedFields(manager)
	if err != nil {
		return nil, fmt.Errorf("can't record the managedFields of %s: %w", a.name(), err)
	}
	meta, _ := out.Object["metadata"].(map[string]interface{})
	switch {
	case len(entries) > 0 && meta == nil:
		out.Object["metadata"] = map[string]interface{}{"managedFields": entries}
	case len(entries) > 0:
		meta["managedFields"] = entries
	case meta != nil:
		delete(meta, "managedFields")
	}
	return out, nil
}

// managedFields encodes the managers after the apply as the API server
// does (managedfields' EncodeObjectManagedFields): one entry per manager,
// sorted by operation, time, manager, apiVersion and subresource. They are
// built as the unstructured object holds them, straight from the field
// sets: a preview encodes one set per child, and the generic conversion
// of a ManagedFieldsEntry would cost more than the merge.
func (a *applyRun) managedFields(manager string) ([]interface{}, error) {
	if len(a.after) == 0 {
		return nil, nil
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	entries := make([]managedEntry, 0, len(a.after))
	for id, vs := range a.after {
		var e metav1.ManagedFieldsEntry
		switch id {
		case a.ours:
			e = metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply}
			if a.written {
				// The server stamps the entry of an operation that
				// changed the object.
				e.Time = &now
			} else if old, ok := a.entries[id]; ok {
				e.Time = old.Time
			}
		case a.firstApply:
			e = metav1.ManagedFieldsEntry{Manager: "before-first-apply", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now}
		default:
			var ok bool
			if e, ok = a.entries[id]; !ok {
				return nil, fmt.Errorf("manager %s appeared from nowhere", id)
			}
		}
		e.APIVersion = string(vs.APIVersion())
		entries = append(entries, managedEntry{ManagedFieldsEntry: e, set: vs.Set()})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].before(entries[j]) })
	out := make([]interface{}, len(entries))
	for i, e := range entries {
		var err error
		if out[i], err = e.unstructured(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// managedEntry is a managedFields entry and the fields it owns.
type managedEntry struct {
	metav1.ManagedFieldsEntry
	set *fieldpath.Set
}

// before is the API server's order of managedFields entries: by
// operation, time, manager, apiVersion and subresource.
func (e managedEntry) before(o managedEntry) bool {
	if e.Operation != o.Operation {
		return e.Operation < o.Operation
	}
	var et, ot int64
	if e.Time != nil {
		et = e.Time.Unix()
	}
	if o.Time != nil {
		ot = o.Time.Unix()
	}
	if et != ot {
		return et < ot
	}
	if e.Manager != o.Manager {
		return e.Manager < o.Manager
	}
	if e.APIVersion != o.APIVersion {
		return e.APIVersion < o.APIVersion
	}
	return e.Subresource < o.Subresource
}

// unstructured is the entry as an unstructured object holds it.
func (e managedEntry) unstructured() (map[string]interface{}, error) {
	fields, err := fieldsV1(e.set)
	if err != nil {
		return nil, fmt.Errorf("can't encode the fields of manager %q: %w", e.Manager, err)
	}
	m := map[string]interface{}{
		"manager":    e.Manager,
		"operation":  string(e.Operation),
		"apiVersion": e.APIVersion,
		"fieldsType": "FieldsV1",
		"fieldsV1":   fields,
	}
	if e.Time != nil {
		m["time"] = e.Time.UTC().Format(time.RFC3339)
	}
	if e.Subresource != "" {
		m["subresource"] = e.Subresource
	}
	return m, nil
}

// fieldsV1 is s as FieldsV1 holds it, the JSON of Set.ToJSON decoded,
// without the JSON: a member is a key with an empty object, a member with
// members of its own also has them and "." in its object.
func fieldsV1(s *fieldpath.Set) (map[string]interface{}, error) {
	out := make(map[string]interface{}, s.Members.Size()+s.Children.Size())
	var err error
	s.Members.Iterate(func(pe fieldpath.PathElement) {
		if err != nil {
			return
		}
		var key string
		if key, err = fieldpath.SerializePathElement(pe); err == nil {
			out[key] = map[string]interface{}{}
		}
	})
	s.Children.Iterate(func(pe fieldpath.PathElement) {
		if err != nil {
			return
		}
		child, _ := s.Children.Get(pe)
		var key string
		if key, err = fieldpath.SerializePathElement(pe); err != nil {
			return
		}
		var m map[string]interface{}
		if m, err = fieldsV1(child); err != nil {
			return
		}
		if s.Members.Has(pe) && len(m) > 0 {
			m["."] = map[string]interface{}{}
		}
		out[key] = m
	})
	return out, err
}

// WouldStore is WouldStore with the converter of desired's GroupVersion,
// falling back to the deduced converter as Compare does; fallback then
// says why (lists are then merged whole, so the result may differ from
// the server's where a list is keyed).
func (s *Schemas) WouldStore(observed, desired *unstructured.Unstructured, manager string) (obj *unstructured.Unstructured, fallback string, err error) {
	if desired == nil {
		return nil, "", errors.New("can't apply: no desired object")
	}
	tc, why := s.TypeConverter(desired.GroupVersionKind().GroupVersion())
	if why == nil {
		obj, err := WouldStore(tc, observed, desired, manager)
		if !errors.Is(err, ErrSchema) || tc == deduced {
			return obj, "", err
		}
		why = err
	}
	obj, err = WouldStore(deduced, observed, desired, manager)
	return obj, why.Error(), err
}
