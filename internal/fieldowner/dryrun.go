package fieldowner

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// CompareDryRun is Compare with the API server's own answer: stored is
// what a server-side apply of the desired object under manager, with
// force and dryRun=All, answered for observed. Compare merges by itself and
// cannot see what the server does after the merge, so it finds a child
// changed whenever defaulting or admission alter what the hook set: a
// default inside a structure or list that apply replaces whole (a downward
// API fieldRef's apiVersion), entries that admission appends to a list the
// hook sets (DefaultTolerationSeconds' tolerations), a value a mutating
// policy or webhook rewrites. The server applies all of that to the dry run
// too, so the stored object differs from the live one exactly when a real
// apply would write: a value, a field removed (a field the hook stopped
// setting is pruned as ever), or the manager's field set. Fields that no
// manager set (admission's additions) and status are not compared, nor the
// metadata the server keeps (resourceVersion, generation, the times in
// managedFields).
//
// observed and stored must be the same object (UID) at the same
// resourceVersion: a dry run answers for the object as the server holds
// it, which may be newer than the one observed.
func CompareDryRun(tc managedfields.TypeConverter, observed, stored *unstructured.Unstructured, manager string) (Result, error) {
	if observed == nil || stored == nil {
		return Result{}, errors.New("can't compare a dry run: no observed or no stored object")
	}
	name := describeObject(observed)
	live, err := tc.ObjectToTyped(withoutServerMeta(observed), typed.AllowDuplicates)
	if err != nil {
		return Result{}, fmt.Errorf("can't convert observed %s: %w: %w", name, ErrSchema, err)
	}
	after, err := tc.ObjectToTyped(withoutServerMeta(stored), typed.AllowDuplicates)
	if err != nil {
		return Result{}, fmt.Errorf("can't convert the dry run of %s: %w: %w", name, ErrSchema, err)
	}
	id, err := applierID(manager)
	if err != nil {
		return Result{}, err
	}
	before, beforeVersion, err := fieldsOf(observed, id)
	if err != nil {
		return Result{}, fmt.Errorf("can't read the managedFields of %s: %w", name, err)
	}
	now, nowVersion, err := fieldsOf(stored, id)
	if err != nil {
		return Result{}, fmt.Errorf("can't read the managedFields of the dry run of %s: %w", name, err)
	}
	versionChange := ""
	if !before.Empty() && !now.Empty() && beforeVersion != nowVersion {
		versionChange = fmt.Sprintf("managedFields: apiVersion %q -> %q", beforeVersion, nowVersion)
	}
	r, err := changes(live, after, before, now, versionChange)
	if err != nil {
		return Result{}, fmt.Errorf("can't compare %s with its dry run: %w", name, err)
	}
	return r, nil
}

// fieldsOf is the field set the manager identified by id owns in obj.
func fieldsOf(obj *unstructured.Unstructured, id string) (*fieldpath.Set, fieldpath.APIVersion, error) {
	managers, _, err := decodeManagedFields(obj.GetManagedFields())
	if err != nil {
		return nil, "", err
	}
	if vs, ok := managers[id]; ok {
		return vs.Set(), vs.APIVersion(), nil
	}
	return fieldpath.NewSet(), "", nil
}

// withoutServerMeta is sanitizeLive without the metadata the system sets
// either, which a dry run of a change moves (resourceVersion, generation)
// and which no apply sets.
func withoutServerMeta(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := sanitizeLive(obj)
	if md, ok := c.Object["metadata"].(map[string]interface{}); ok {
		for _, f := range systemMeta {
			delete(md, f)
		}
	}
	return c
}

// CompareDryRun is CompareDryRun with the converter of observed's
// GroupVersion, falling back to the deduced converter as Compare does.
// desired is not compared: it is the object applied, which Unchanged
// remembers a converged answer by.
func (s *Schemas) CompareDryRun(observed, _, stored *unstructured.Unstructured, manager string) (Result, error) {
	if observed == nil {
		return Result{}, errors.New("can't compare a dry run: no observed object")
	}
	return s.withConverter(observed.GroupVersionKind().GroupVersion(), func(tc managedfields.TypeConverter) (Result, error) {
		return CompareDryRun(tc, observed, stored, manager)
	})
}
