package variables

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func parent() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Thing",
		"metadata": map[string]interface{}{
			"name": "p", "namespace": "ns",
			"labels": map[string]interface{}{"team": "blue", "app.kubernetes.io/name": "things"},
		},
		"spec": map[string]interface{}{
			"replicas": int64(3),
			"tls":      true,
			"ports":    []interface{}{int64(80), int64(443)},
		},
	}}
}

func childValues() Values {
	vars := ToValues(ForParent("things", 7, parent()))
	child := ToValues(ForChild(hookapi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p-a"}))
	return Merge(vars, child)
}

func TestValuesAreTheWireVariables(t *testing.T) {
	// What CEL, templates and lookups read is exactly what a patch hook
	// receives: the JSON of the typed variables.
	vars := ForParent("things", 7, parent())
	data, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]interface{}
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatal(err)
	}
	values, err := json.Marshal(ToValues(vars))
	if err != nil {
		t.Fatal(err)
	}
	var fromValues map[string]interface{}
	if err := json.Unmarshal(values, &fromValues); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wire, fromValues) {
		t.Errorf("values differ from the wire variables:\nwire   %s\nvalues %s", data, values)
	}
	// Every leaf of the wire variables is a path CheckPath accepts.
	for _, p := range leafPaths("", wire) {
		if err := CheckPath(p, ParentScope); err != nil {
			t.Errorf("wire variable %s: %v", p, err)
		}
	}
}

func leafPaths(prefix string, v interface{}) []string {
	m, ok := v.(map[string]interface{})
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, c := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leafPaths(p, c)...)
	}
	sort.Strings(out)
	return out
}

func TestParentWithoutLabelsOrSpecHasEmptyMaps(t *testing.T) {
	p := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Thing", "metadata": map[string]interface{}{"name": "p"}}}
	data, err := json.Marshal(ForParent("c", 1, p))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"labels":{}`, `"annotations":{}`, `"spec":{}`, `"namespace":""`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("variables %s lack %s", data, want)
		}
	}
}

func TestForParentCopiesTheSpec(t *testing.T) {
	p := parent()
	vars := ForParent("c", 1, p)
	vars.Builtin.Parent.Spec["replicas"] = int64(99)
	if got, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas"); got != 3 {
		t.Errorf("changing the variables changed the parent: replicas %d", got)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path  string
		scope Scope
		want  string // "" for valid
	}{
		{"builtin", ParentScope, ""},
		{"builtin.parent.spec.replicas", ParentScope, ""},
		{"builtin.parent.spec", ParentScope, ""},
		{"builtin.parent.spec.template.spec.containers.0.image", ParentScope, ""},
		{"builtin.parent.metadata.labels.app.kubernetes.io/name", ParentScope, ""},
		{"builtin.parent.metadata.annotations", ParentScope, ""},
		{"builtin.parent.metadata.name", ParentScope, ""},
		{"builtin.controller.generation", ParentScope, ""},
		{"builtin.child.name", ChildScope, ""},
		{"builtin.child", ChildScope, ""},
		{"builtin.child.name", ParentScope, `builtin has no field "child"`},
		{"builtin.child.labels", ChildScope, `builtin.child has no field "labels"`},
		{"builtin.cluster.name", ChildScope, `builtin has no field "cluster"`},
		{"builtin.parent.status.ready", ParentScope, `builtin.parent has no field "status"`},
		{"builtin.parent.metadata.uid", ParentScope, `builtin.parent.metadata has no field "uid"`},
		{"builtin.controller.name.first", ParentScope, "builtin.controller.name has no fields"},
		{"parent.spec.replicas", ParentScope, `variables start with "builtin"`},
		{"builtin..parent", ParentScope, "empty segment"},
		{"builtin.parent.spec.", ParentScope, "empty segment"},
		{"", ParentScope, "empty segment"},
	} {
		err := CheckPath(tc.path, tc.scope)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckPath(%q): %v, want valid", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckPath(%q) = %v, want an error containing %q", tc.path, err, tc.want)
		}
	}
}

func TestLookup(t *testing.T) {
	values := childValues()
	for path, want := range map[string]interface{}{
		"builtin.parent.spec.replicas":                          int64(3),
		"builtin.parent.spec.ports.1":                           int64(443),
		"builtin.parent.metadata.labels.app.kubernetes.io/name": "things",
		"builtin.parent.metadata.namespace":                     "ns",
		"builtin.controller.generation":                         int64(7),
		"builtin.child.name":                                    "p-a",
	} {
		got, ok := Lookup(values, path)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Lookup(%s) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"builtin.parent.spec.size", "builtin.parent.spec.ports.2", "builtin.parent.spec.replicas.x", "builtin.parent.metadata.labels.tier"} {
		if got, ok := Lookup(values, path); ok {
			t.Errorf("Lookup(%s) = %v, want not set", path, got)
		}
	}
}

func TestConditions(t *testing.T) {
	ctx := context.Background()
	values := ToValues(ForParent("things", 7, parent()))
	for _, tc := range []struct {
		expr      string
		want      bool
		wantError string // at compile time
		evalError string
	}{
		{expr: `builtin.parent.spec.replicas > 2`, want: true},
		{expr: `builtin.parent.spec.tls`, want: true},
		{expr: `"team" in builtin.parent.metadata.labels && builtin.parent.metadata.labels.team == "blue"`, want: true},
		{expr: `"tier" in builtin.parent.metadata.labels`, want: false},
		{expr: `has(builtin.parent.spec.size)`, want: false},
		{expr: `builtin.controller.generation == 7 && builtin.controller.name == "things"`, want: true},
		{expr: `builtin.parent.metadata.namespace.startsWith("n")`, want: true},
		{expr: `builtin.parent.spec.size > 1`, evalError: "no such key"},
		{expr: `builtin.parent.spec.replicas`, evalError: "not a bool"},
		{expr: `builtin.parent.spex.replicas > 1`, wantError: "undefined field 'spex'"},
		{expr: `builtin.child.name == "a"`, wantError: "undefined field 'child'"},
		{expr: `parent.spec.replicas > 1`, wantError: "undeclared reference"},
		{expr: `builtin.controller.name`, wantError: "must evaluate to a bool"},
		{expr: `builtin.controller.generation == "7"`, wantError: "no matching overload"},
		{expr: `builtin.parent.spec.replicas >`, wantError: "does not compile"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			checkErr := CheckCondition(tc.expr)
			cond, err := CompileCondition(tc.expr)
			if tc.wantError != "" {
				for _, e := range []error{checkErr, err} {
					if e == nil || !strings.Contains(e.Error(), tc.wantError) {
						t.Errorf("error %v, want one containing %q", e, tc.wantError)
					}
				}
				return
			}
			if checkErr != nil || err != nil {
				t.Fatalf("check: %v, compile: %v", checkErr, err)
			}
			got, err := cond.Eval(ctx, values)
			if tc.evalError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.evalError) {
					t.Errorf("Eval = %v, %v; want an error containing %q", got, err, tc.evalError)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Eval = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	values := childValues()
	for _, tc := range []struct {
		text      string
		want      interface{}
		wantError string // at parse time
		execError string
	}{
		{text: `{{ .builtin.parent.spec.replicas }}`, want: int64(3)},
		{text: `"{{ .builtin.parent.spec.replicas }}"`, want: "3"},
		{text: `"{{ .builtin.parent.metadata.name }}\t\u00e9"`, want: "p\t\u00e9"},
		{text: `{{ .builtin.parent.metadata.name }}-{{ .builtin.child.name }}`, want: "p-p-a"},
		{text: `{{ index .builtin.parent.metadata.labels "app.kubernetes.io/name" }}`, want: "things"},
		{text: `[{{ range .builtin.parent.spec.ports }}{{ . }}, {{ end }}]`, want: []interface{}{int64(80), int64(443)}},
		{text: `{team: {{ $.builtin.parent.metadata.labels.team }}}`, want: map[string]interface{}{"team": "blue"}},
		{text: `{{ if .builtin.parent.spec.tls }}https{{ else }}http{{ end }}`, want: "https"},
		{text: `{{ .builtin.parent.spec.size }}`, execError: `map has no entry for key "size"`},
		{text: `{{ .builtin.parent.status.ready }}`, wantError: `builtin.parent has no field "status"`},
		{text: `{{ $.builtin.cluster.name }}`, wantError: `builtin has no field "cluster"`},
		{text: `{{ .builtin.parent.spec.replicas `, wantError: "does not parse"},
		{text: `{{ .builtin.parent.metadata.name }}: [`, execError: "is not YAML"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.text)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Errorf("ParseTemplate: %v, want an error containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Execute(values)
			if tc.execError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.execError) {
					t.Errorf("Execute = %v, %v; want an error containing %q", got, err, tc.execError)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Execute = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// TestSimpleTemplatesPrintAsTextTemplate: templates of text and field
// chains are written without text/template, exactly as it writes them, or
// left to it.
func TestSimpleTemplatesPrintAsTextTemplate(t *testing.T) {
	values := childValues()
	for _, tc := range []struct {
		text   string
		simple bool
	}{
		{`{{ .builtin.parent.metadata.name }}-{{ .builtin.child.name }}`, true},
		{`"{{ .builtin.parent.spec.replicas }} replicas, tls {{ .builtin.parent.spec.tls }}"`, true},
		{`plain text`, true},
		{`{{.builtin.controller.generation}}`, true},
		// text/template's business: a list, a missing key, a function.
		{`{{ .builtin.parent.spec.ports }}`, false},
		{`{{ .builtin.parent.spec.size }}`, false},
		{`{{ printf "%03d" .builtin.parent.spec.replicas }}`, false},
		{`{{ $x := .builtin.child.name }}{{ $x }}`, false},
	} {
		tmpl, err := ParseTemplate(tc.text)
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		got, ok := tmpl.executeSimple(values)
		if ok != tc.simple {
			t.Errorf("%s: written without text/template: %v, want %v", tc.text, ok, tc.simple)
			continue
		}
		if !ok {
			continue
		}
		var want strings.Builder
		if err := tmpl.tmpl.Execute(&want, map[string]interface{}(values)); err != nil {
			t.Fatal(err)
		}
		if string(got) != want.String() {
			t.Errorf("%s: %q, text/template writes %q", tc.text, got, want.String())
		}
	}
}

// TestTemplatesAreBounded: a template that writes too much, loops too
// often or runs too long (nested ranges, a defined template calling itself
// twice) stops with the bound it passed, and the caller gets its answer.
func TestTemplatesAreBounded(t *testing.T) {
	values := childValues()
	nested := func(depth int, body string) string {
		return strings.Repeat(`{{ range $.builtin.parent.spec.ports }}`, depth) + body + strings.Repeat(`{{ end }}`, depth)
	}
	for _, tc := range []struct {
		name, text, want string
	}{
		{"too much output", nested(20, strings.Repeat("x", 1024)), "output is longer than"},
		{"nested ranges writing nothing", nested(40, ""), "stopped after"},
		// 2^40 calls, 40 deep: text/template's depth limit does not see it.
		{"a template calling itself twice", `{{ define "t" }}{{ if . }}{{ template "t" (slice . 1) }}{{ template "t" (slice . 1) }}{{ end }}{{ end }}{{ template "t" (printf "%040d" 0) }}`, "stopped after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tmpl.Execute(values); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Execute: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
