package fieldowner

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSanitizeSharedIsSanitize: runApply's sanitizeShared gives what
// Sanitize gives, leaves desired alone, and owns the two maps WouldStore
// writes to (the top level and metadata).
func TestSanitizeSharedIsSanitize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obj    map[string]interface{}
		shared bool
	}{
		{"sanitized already", map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": "a", "labels": map[string]interface{}{"app": "a"}},
			"data":     map[string]interface{}{"k": "v"},
		}, true},
		{"status and system metadata", map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]interface{}{"name": "a", "uid": "u", "resourceVersion": "7", "managedFields": []interface{}{}},
			"spec":     map[string]interface{}{"n": int64(3), "f": 1.5, "list": []interface{}{"x", nil, true}, "num": json.Number("4")},
			"status":   map[string]interface{}{"ready": true},
		}, true},
		{"no metadata", map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}, true},
		{"a whole float deep down", map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]interface{}{"name": "a"},
			"spec":     map[string]interface{}{"list": []interface{}{map[string]interface{}{"n": 3.0}}},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := &unstructured.Unstructured{Object: tc.obj}
			before := desired.DeepCopy()
			got := sanitizeShared(desired)
			if want := Sanitize(before); !reflect.DeepEqual(got, want) {
				t.Errorf("sanitizeShared\n got %v\nwant %v", got.Object, want.Object)
			}
			if !reflect.DeepEqual(desired, before) {
				t.Errorf("desired changed: %v", desired.Object)
			}
			got.Object["added"] = true
			if md, ok := got.Object["metadata"].(map[string]interface{}); ok {
				md["added"] = true
			}
			if !reflect.DeepEqual(desired, before) {
				t.Errorf("writing the result's top level or metadata changed desired: %v", desired.Object)
			}
			spec, _ := got.Object["spec"].(map[string]interface{})
			wantSpec, _ := desired.Object["spec"].(map[string]interface{})
			if shares := spec != nil && reflect.ValueOf(spec).Pointer() == reflect.ValueOf(wantSpec).Pointer(); shares != tc.shared && spec != nil {
				t.Errorf("spec shared with desired: %v, want %v", shares, tc.shared)
			}
		})
	}
}

// TestSanitizedSaysWhenSanitizeWouldCopyAnyway: whole floats (which
// Sanitize turns into integers) and values that are not JSON's (which its
// deep copy refuses) take Sanitize itself.
func TestSanitizedSaysWhenSanitizeWouldCopyAnyway(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    interface{}
		want bool
	}{
		{"JSON's values", map[string]interface{}{"a": []interface{}{"s", int64(1), 1.5, true, nil, json.Number("2")}}, true},
		{"a whole float", []interface{}{2.0}, false},
		{"an int", map[string]interface{}{"n": 3}, false},
		{"a float32", []interface{}{float32(1.5)}, false},
		{"a typed map", map[string]interface{}{"m": map[string]string{"k": "v"}}, false},
	} {
		if got := sanitized(tc.v); got != tc.want {
			t.Errorf("%s: sanitized is %v, want %v", tc.name, got, tc.want)
		}
	}
}
