package fieldowner

import (
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/composite-apiserver/composite-apiserver/internal/diffline"
)

// describeSet makes one line per field of set: a field that has fields of
// its own in set (a map, a struct) is described by those, while an element
// of a list is one line, whole, since it is added or removed as a unit (or
// changes in fields that are then its own lines).
func describeSet(set *fieldpath.Set, line func(fieldpath.Path) string) []string {
	var paths []fieldpath.Path
	set.Iterate(func(p fieldpath.Path) { paths = append(paths, p.Copy()) })
	// A prefix sorts before the paths it starts, so a list element is
	// seen before its fields.
	sort.Slice(paths, func(i, j int) bool { return paths[i].Compare(paths[j]) < 0 })
	leaves := set.Leaves()
	described := fieldpath.NewSet()
	var lines []string
	for _, p := range paths {
		if len(p) == 0 || coveredBy(described, p) {
			continue
		}
		if p[len(p)-1].FieldName != nil && !leaves.Has(p) {
			continue
		}
		described.Insert(p)
		lines = append(lines, line(p))
	}
	return lines
}

// coveredBy tells whether set holds p or one of its prefixes.
func coveredBy(set *fieldpath.Set, p fieldpath.Path) bool {
	for i := 1; i <= len(p); i++ {
		if set.Has(p[:i]) {
			return true
		}
	}
	return false
}

// formatPath writes a field path in diffline's format: keys joined
// with dots, quoted when they are not plain identifiers
// (metadata.labels["app.kubernetes.io/name"]), plus the list elements of
// structured-merge-diff: spec.ports[port=80,protocol="TCP"] for a keyed
// list, metadata.finalizers[="x"] for a set, args[2] for a position.
func formatPath(p fieldpath.Path) string {
	var b strings.Builder
	for i, pe := range p {
		switch {
		case pe.FieldName != nil:
			seg := diffline.Key(*pe.FieldName)
			if i > 0 && seg[0] != '[' {
				b.WriteByte('.')
			}
			b.WriteString(seg)
		case pe.Key != nil:
			parts := make([]string, 0, len(*pe.Key))
			for _, f := range *pe.Key {
				parts = append(parts, f.Name+"="+diffline.Render(f.Value.Unstructured()))
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		case pe.Value != nil:
			b.WriteString("[=" + diffline.Render((*pe.Value).Unstructured()) + "]")
		case pe.Index != nil:
			b.WriteString("[" + strconv.Itoa(*pe.Index) + "]")
		}
	}
	return b.String()
}

// renderAt renders the value at p in obj as JSON, or <none>.
func renderAt(obj interface{}, p fieldpath.Path) string {
	v, ok := valueAt(obj, p)
	if !ok {
		return diffline.NoValue
	}
	return diffline.Render(v)
}

// valueAt follows p down an unstructured value.
func valueAt(v interface{}, p fieldpath.Path) (interface{}, bool) {
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := v.(map[string]interface{})
			if !ok {
				return nil, false
			}
			if v, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
		case pe.Key != nil:
			l, ok := v.([]interface{})
			if !ok {
				return nil, false
			}
			if v, ok = findKeyed(l, *pe.Key); !ok {
				return nil, false
			}
		case pe.Value != nil:
			l, ok := v.([]interface{})
			if !ok {
				return nil, false
			}
			found := false
			for _, e := range l {
				if value.Equals(value.NewValueInterface(e), *pe.Value) {
					v, found = e, true
					break
				}
			}
			if !found {
				return nil, false
			}
		case pe.Index != nil:
			l, ok := v.([]interface{})
			if !ok || *pe.Index < 0 || *pe.Index >= len(l) {
				return nil, false
			}
			v = l[*pe.Index]
		default:
			return nil, false
		}
	}
	return v, true
}

// findKeyed finds the element of a keyed list with the key's values. A key
// field may be missing from the element when the schema defaults it (a
// Service port's protocol), so an element that lacks key fields but
// matches on the others does when no element matches them all.
func findKeyed(l []interface{}, key value.FieldList) (interface{}, bool) {
	var partial interface{}
	for _, e := range l {
		m, ok := e.(map[string]interface{})
		if !ok {
			continue
		}
		exact, matches := true, true
		for _, f := range key {
			got, ok := m[f.Name]
			if !ok {
				exact = false
				continue
			}
			if !value.Equals(value.NewValueInterface(got), f.Value) {
				matches = false
				break
			}
		}
		switch {
		case matches && exact:
			return e, true
		case matches && partial == nil:
			partial = e
		}
	}
	return partial, partial != nil
}
