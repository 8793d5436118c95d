package sync

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// noValue stands for a field that is not set.
const noValue = "<none>"

// Diff lists the fields in which observed differs from desired, one line
// each, sorted: `data.color: "blue" -> "green"`, `spec.replicas: <none> -> 3`.
// Values are JSON.
//
// Only fields present in desired count: a hook returns partial objects and
// the cluster fills in defaults, so a field the hook did not set is not a
// difference. For the same reason a list is compared whole (and reported in
// one line) but each of its elements only on the fields desired sets, so the
// defaults the API server adds to, say, containers do not make every
// Deployment look changed. Metadata is ignored except labels and
// annotations (the rest is the system's or identity), and so are apiVersion,
// kind and status: a parent never writes its children's status, so a status
// in a desired child could only show up as a change that never converges.
func Diff(observed, desired *unstructured.Unstructured) []string {
	if desired == nil {
		return nil
	}
	var obs map[string]interface{}
	if observed != nil {
		obs = observed.Object
	}
	var lines []string
	for field, want := range desired.Object {
		switch field {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			wantMeta, ok := want.(map[string]interface{})
			if !ok {
				continue
			}
			obsMeta, _ := obs["metadata"].(map[string]interface{})
			for _, f := range []string{"labels", "annotations"} {
				if v, ok := wantMeta[f]; ok {
					got, found := obsMeta[f]
					diffValue(&lines, []string{"metadata", f}, got, found, v)
				}
			}
			continue
		}
		got, found := obs[field]
		diffValue(&lines, []string{field}, got, found, want)
	}
	sort.Strings(lines)
	return lines
}

// diffValue appends the differences at path. Maps are walked down to their
// leaves so that a line names the field that changed; anything else,
// including lists, is one value.
func diffValue(lines *[]string, path []string, got interface{}, found bool, want interface{}) {
	if wantMap, ok := want.(map[string]interface{}); ok {
		gotMap, isMap := got.(map[string]interface{})
		if !found || got == nil || isMap {
			for k, v := range wantMap {
				g, f := gotMap[k]
				diffValue(lines, append(path[:len(path):len(path)], k), g, f, v)
			}
			return
		}
		// The field changed type: report it whole.
	}
	if want == nil && !found {
		// Asking for null where nothing is set is no change.
		return
	}
	if found && covers(got, want) {
		return
	}
	old := noValue
	if found {
		old = render(got)
	}
	*lines = append(*lines, fmt.Sprintf("%s: %s -> %s", formatPath(path), old, render(want)))
}

// covers reports whether got already has every field of want with the same
// value: maps only on want's keys, lists element by element with the same
// length and order, numbers by value whatever their Go type.
func covers(got, want interface{}) bool {
	switch w := want.(type) {
	case map[string]interface{}:
		g, ok := got.(map[string]interface{})
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, found := g[k]
			if !found {
				if wv != nil {
					return false
				}
				continue
			}
			if !covers(gv, wv) {
				return false
			}
		}
		return true
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !covers(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	if wn, ok := toFloat(want); ok {
		gn, ok := toFloat(got)
		return ok && gn == wn
	}
	return reflect.DeepEqual(got, want)
}

// toFloat turns the number types found in unstructured objects into one, so
// that 3 from a hook equals 3.0 from the cluster.
func toFloat(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func render(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// formatPath joins a field path with dots, quoting keys that are not plain
// identifiers: metadata.labels["app.kubernetes.io/name"].
func formatPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		switch {
		case !plainKey.MatchString(p):
			b.WriteString("[" + strconv.Quote(p) + "]")
		case i > 0:
			b.WriteString("." + p)
		default:
			b.WriteString(p)
		}
	}
	return b.String()
}
