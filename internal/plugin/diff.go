package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/diffline"
)

// writeDiffs prints a unified diff for each Update and Recreate of the
// plan, the items whose diff says what an apply changes.
func writeDiffs(w io.Writer, plan []v1alpha1.SyncPlanItem) error {
	for _, item := range plan {
		if item.Action != v1alpha1.SyncActionUpdate && item.Action != v1alpha1.SyncActionRecreate {
			continue
		}
		if _, err := io.WriteString(w, unifiedDiff(item)); err != nil {
			return err
		}
	}
	return nil
}

// unifiedDiff renders one item's diff lines as a unified diff between the
// live child and the one the sync would store, named as `kubectl diff`
// names files (group.version.Kind.namespace.name), so that diff viewers
// colour it:
//
//	--- live/v1.ConfigMap.ns.p-a
//	+++ desired/v1.ConfigMap.ns.p-a
//	@@ -1,2 +1,1 @@ Update: differs; updateStrategy InPlace updates it in place
//	-data.color: "blue"
//	+data.color: "green"
//	-data.size: "L"
//
// A field's old value is a "-" line and its new value a "+" line; a line
// that changes ownership but no value (an adoption) is context.
func unifiedDiff(item v1alpha1.SyncPlanItem) string {
	var body []string
	oldLines, newLines := 0, 0
	for _, line := range item.Diff {
		for _, out := range diffLines(line) {
			switch out[0] {
			case '-':
				oldLines++
			case '+':
				newLines++
			default:
				oldLines++
				newLines++
			}
			body = append(body, out)
		}
	}
	file := diffFileName(item)
	var b strings.Builder
	fmt.Fprintf(&b, "--- live/%s\n+++ desired/%s\n", file, file)
	header := fmt.Sprintf("@@ -%s +%s @@ %s", hunkRange(oldLines), hunkRange(newLines), item.Action)
	if item.Reason != "" {
		header += ": " + item.Reason
	}
	b.WriteString(header + "\n")
	for _, line := range body {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// hunkRange is a hunk's start,count: an empty side starts at line 0.
func hunkRange(n int) string {
	if n == 0 {
		return "0,0"
	}
	return fmt.Sprintf("1,%d", n)
}

// diffFileName names a child as `kubectl diff` names its files.
func diffFileName(item v1alpha1.SyncPlanItem) string {
	gv, err := schema.ParseGroupVersion(item.APIVersion)
	version := item.APIVersion
	if err == nil && gv.Group != "" {
		version = gv.Group + "." + gv.Version
	}
	parts := []string{version, item.Kind}
	if item.Namespace != "" {
		parts = append(parts, item.Namespace)
	}
	return strings.Join(append(parts, item.Name), ".")
}

// diffLines turns one line of a plan's diff into unified-diff lines:
//
//	data.color: "blue" -> "green"     -data.color: "blue" / +data.color: "green"
//	data.size: <none> -> "L"          +data.size: "L"
//	- data.size: "L"                  -data.size: "L"
//	data.color: "blue" (adopt)        (context)
//
// Values are JSON, so a " -> " inside one is never taken for the arrow.
func diffLines(line string) []string {
	if rest, ok := strings.CutPrefix(line, "- "); ok {
		return []string{"-" + rest}
	}
	colon := indexOutsideStrings(line, ": ")
	if colon < 0 {
		return []string{" " + line}
	}
	path, values := line[:colon], line[colon+2:]
	arrow := indexOutsideStrings(values, " -> ")
	if arrow < 0 {
		return []string{" " + line}
	}
	before, after := values[:arrow], values[arrow+4:]
	if !isValue(before) || !isValue(after) {
		// Not a change of value, e.g. "managedFields: apiVersion "a" -> "b"".
		return []string{" " + line}
	}
	var out []string
	if before != diffline.NoValue {
		out = append(out, "-"+path+": "+before)
	}
	if after != diffline.NoValue {
		out = append(out, "+"+path+": "+after)
	}
	return out
}

// isValue tells whether s is a value as a plan's diff writes them.
func isValue(s string) bool {
	return s == diffline.NoValue || json.Valid([]byte(s))
}

// indexOutsideStrings is strings.Index of sep in s, skipping what is inside
// JSON strings (which a path's keys and the values are).
func indexOutsideStrings(s, sep string) int {
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && strings.HasPrefix(s[i:], sep):
			return i
		}
	}
	return -1
}
