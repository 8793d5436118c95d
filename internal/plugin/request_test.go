package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// childrenFiles are observed children in every shape the flag takes: YAML
// documents (an empty one too), a List as kubectl get -o yaml writes it,
// and a stream of JSON objects. Their order is the command line's.
var childrenFiles = [][2]string{
	{"docs.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: p-a, namespace: ns}
data: {color: blue, replicas: "3"}
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns}
spec: {replicas: 2}
`},
	{"list.yaml", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: p-b, namespace: ns}
- apiVersion: v1
  kind: Service
  metadata: {name: p, namespace: ns}
`},
	{"objects.json", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p-c", "namespace": "ns"}}
{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p-a", "namespace": "other"}}`},
}

func TestChildrenFilesMakeTheHookRequestShape(t *testing.T) {
	var files []string
	for _, f := range childrenFiles {
		files = append(files, writeFile(t, f[0], f[1]))
	}
	parent := writeFile(t, "parent.yaml", "apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: p, namespace: ns}\n")
	built, err := buildRequest(parentFlags{file: parent, children: files}, "", &fileReader{})
	if err != nil {
		t.Fatal(err)
	}
	req, id := built.sync, built.parent
	// None of the children has managedFields, as kubectl get writes them.
	if len(built.warnings) != 1 || !strings.Contains(built.warnings[0], "6 of the 6 children have no metadata.managedFields") {
		t.Errorf("warnings %q", built.warnings)
	}
	if id.String() != "Hello ns/p" || id.fileName() != "ns.p.json" {
		t.Errorf("parent %q, file %q", id, id.fileName())
	}
	var children map[string]map[string]struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct{ Replicas int64 }
		Data     map[string]string
	}
	if err := json.Unmarshal(req.Spec.Children.Raw, &children); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for group, objs := range children {
		for key := range objs {
			keys[group] = append(keys[group], key)
		}
	}
	want := map[string]int{"ConfigMap.v1": 4, "Deployment.apps/v1": 1, "Service.v1": 1}
	for group, n := range want {
		if len(keys[group]) != n {
			t.Errorf("%s has keys %v, want %d", group, keys[group], n)
		}
	}
	if len(keys) != len(want) {
		t.Errorf("groups %v, want %v", keys, want)
	}
	// A name two objects of a type share is keyed by namespace/name after
	// its first use.
	if children["ConfigMap.v1"]["p-a"].Metadata.Namespace != "ns" || children["ConfigMap.v1"]["other/p-a"].Metadata.Namespace != "other" {
		t.Errorf("ConfigMaps %v: want p-a of ns and other/p-a", keys["ConfigMap.v1"])
	}
	if got := children["Deployment.apps/v1"]["web"].Spec.Replicas; got != 2 {
		t.Errorf("the Deployment's replicas = %d, want 2", got)
	}
	if got := children["ConfigMap.v1"]["p-a"].Data["replicas"]; got != "3" {
		t.Errorf("data kept as strings: %q", got)
	}
}

func TestParentRequests(t *testing.T) {
	built, err := buildRequest(parentFlags{ref: "ns/p1"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	req, id := built.sync, built.parent
	if req.Spec.ParentRef == nil || req.Spec.ParentRef.Namespace != "ns" || req.Spec.ParentRef.Name != "p1" || req.Spec.Parent != nil {
		t.Fatalf("--parent ns/p1: %+v %v", req, err)
	}
	if req.Kind != "SyncRequest" || id.fileName() != "ns.p1.json" {
		t.Errorf("request %+v, file %s", req.TypeMeta, id.fileName())
	}
	// NAME alone is in -n's namespace, or cluster-scoped without it.
	if built, _ := buildRequest(parentFlags{ref: "p1"}, "team", nil); built.sync.Spec.ParentRef.Namespace != "team" {
		t.Errorf("--parent p1 -n team: namespace %q", built.sync.Spec.ParentRef.Namespace)
	}
	if built, _ := buildRequest(parentFlags{ref: "p1"}, "", nil); built.sync.Spec.ParentRef.Namespace != "" || built.parent.fileName() != "p1.json" {
		t.Errorf("--parent p1: namespace %q, file %s", built.sync.Spec.ParentRef.Namespace, built.parent.fileName())
	}
	// An inline parent without a namespace takes -n's.
	parent := writeFile(t, "parent.json", `{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p"}}`)
	built, err = buildRequest(parentFlags{file: parent}, "team", &fileReader{})
	if err != nil || !strings.Contains(string(built.sync.Spec.Parent.Raw), `"namespace":"team"`) {
		t.Fatalf("inline parent with -n team: %v", err)
	}
	// Standard input works for the parent.
	built, err = buildRequest(parentFlags{file: "-"}, "", &fileReader{stdin: strings.NewReader("apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: from-stdin}\n")})
	if err != nil || !strings.Contains(string(built.sync.Spec.Parent.Raw), "from-stdin") {
		t.Errorf("parent from stdin: %v", err)
	}
}

func TestBadParentsAndChildren(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		f, err := os.CreateTemp(dir, "*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return f.Name()
	}
	good := file("apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: p}\n")
	for _, tc := range []struct {
		name  string
		flags parentFlags
		want  string
	}{
		{"no parent", parentFlags{}, "no parent"},
		{"both", parentFlags{file: good, ref: "ns/p"}, "both"},
		{"bad ref", parentFlags{ref: "a/b/c"}, "NAMESPACE/NAME"},
		{"empty namespace", parentFlags{ref: "/p"}, "NAMESPACE/NAME"},
		{"missing file", parentFlags{file: filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"two parents", parentFlags{file: file("apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\napiVersion: v1\nkind: A\nmetadata: {name: b}\n")}, "2 objects"},
		{"no parent in file", parentFlags{file: file("---\n")}, "0 objects"},
		{"not YAML", parentFlags{file: file("{this is: [not")}, "document 1"},
		{"no kind", parentFlags{file: file("apiVersion: v1\nmetadata: {name: a}\n")}, "no kind"},
		{"no name", parentFlags{file: good, children: []string{file("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")}}, "no metadata.name"},
		{"no apiVersion", parentFlags{file: good, children: []string{file("kind: ConfigMap\nmetadata: {name: a}\n")}}, "no apiVersion"},
		{"bad apiVersion", parentFlags{file: good, children: []string{file("apiVersion: a/b/c\nkind: ConfigMap\nmetadata: {name: a}\n")}}, "a/b/c"},
		{"duplicate child", parentFlags{file: good, children: []string{file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")}}, "twice"},
		{"stdin twice", parentFlags{file: "-", children: []string{"-"}}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildRequest(tc.flags, "", &fileReader{stdin: strings.NewReader("apiVersion: v1\nkind: A\nmetadata: {name: a}\n")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one about %q", err, tc.want)
			}
		})
	}
}

func TestChildrenWithManagedFieldsNeedNoWarning(t *testing.T) {
	children := writeFile(t, "children.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: p-a
  managedFields:
  - manager: metacontroller.k8s.io/hello
    operation: Apply
    apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1: {f:data: {f:color: {}}}
data: {color: blue}
`)
	built, err := buildRequest(parentFlags{ref: "ns/p", children: []string{children}}, "", &fileReader{})
	if err != nil || len(built.warnings) != 0 {
		t.Errorf("warnings %q, error %v", built.warnings, err)
	}
}
