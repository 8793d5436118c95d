package standalone

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// earliestShapeManifest is framework.EarliestShapeController named name, so
// that parallel runs do not share an object.
func earliestShapeManifest(name string) string {
	return strings.Replace(framework.EarliestShapeController, "\n  name: catset-controller\n", "\n  name: "+name+"\n", 1)
}

func TestEarliestShapeAppliesWithWarningsAndReadsBackInTodaysShape(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	wantSpec := yamlToMap(t, framework.EarliestShapeStoredSpec)

	checkWarnings := func(t *testing.T, what, stderr string) {
		t.Helper()
		warnings := warningLines(stderr)
		for _, w := range framework.EarliestShapeWarnings {
			if !hasWarning(warnings, w.Field, w.Text) {
				t.Errorf("%s printed no warning at %s saying %q; stderr:\n%s", what, w.Field, w.Text, stderr)
			}
		}
		if len(warnings) != len(framework.EarliestShapeWarnings) {
			t.Errorf("%s printed %d warnings, want %d:\n%s", what, len(warnings), len(framework.EarliestShapeWarnings), strings.Join(warnings, "\n"))
		}
	}
	// readBack checks what `kubectl get -o yaml` shows: today's shape
	// only, and returns the object's generation and resourceVersion.
	readBack := func(t *testing.T, name string) (generation, resourceVersion any) {
		t.Helper()
		got := getCCYAML(t, s, name)
		if !reflect.DeepEqual(got["spec"], wantSpec) {
			t.Errorf("kubectl get -o yaml shows spec\n%v\nwant today's shape\n%v", got["spec"], wantSpec)
		}
		meta := got["metadata"].(map[string]any)
		return meta["generation"], meta["resourceVersion"]
	}

	for _, tc := range []struct {
		name           string
		first, again   []string
		created, reran string
	}{
		{"apply", []string{"apply"}, []string{"apply"}, "created", "configured"},
		{"server-side apply", []string{"apply", "--server-side"}, []string{"apply", "--server-side"}, "serverside-applied", "serverside-applied"},
		{"create then replace", []string{"create"}, []string{"replace"}, "created", "replaced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("earliest-" + strings.ReplaceAll(tc.name, " ", "-"))
			path := writeManifest(t, earliestShapeManifest(name))

			stdout, stderr, err := s.kubectl(append(tc.first, "-f", path)...)
			if err != nil {
				t.Fatalf("kubectl %s refused Metacontroller's earliest shape: %v\nstderr:\n%s", tc.first, err, stderr)
			}
			if want := "compositecontroller.metacontroller.k8s.io/" + name + " " + tc.created; strings.TrimSpace(stdout) != want {
				t.Errorf("kubectl %s printed %q, want %q", tc.first, stdout, want)
			}
			checkWarnings(t, "kubectl "+strings.Join(tc.first, " "), stderr)
			generation, resourceVersion := readBack(t, name)
			checkManagedFieldsInTodaysShape(t, s, name)

			// Again, as a user re-applies a manifest: the stored object
			// is today's shape, the manifest the earliest; they agree,
			// so nothing changes and nothing is refused.
			stdout, stderr, err = s.kubectl(append(tc.again, "-f", path)...)
			if err != nil {
				t.Fatalf("kubectl %s of the same manifest again: %v\nstderr:\n%s", tc.again, err, stderr)
			}
			if want := "compositecontroller.metacontroller.k8s.io/" + name + " " + tc.reran; strings.TrimSpace(stdout) != want {
				t.Errorf("kubectl %s again printed %q, want %q", tc.again, stdout, want)
			}
			checkWarnings(t, "kubectl "+strings.Join(tc.again, " ")+" again", stderr)
			g, rv := readBack(t, name)
			if g != generation || rv != resourceVersion {
				t.Errorf("the same manifest again changed the object: generation %v -> %v, resourceVersion %v -> %v", generation, g, resourceVersion, rv)
			}
			checkManagedFieldsInTodaysShape(t, s, name)
		})
	}

	// An edited manifest, still in the earliest shape, applies over the
	// stored object: a resource dropped from the list is gone, the new
	// Service and path replace the stored ones.
	for _, apply := range [][]string{{"apply"}, {"apply", "--server-side"}} {
		t.Run("edited then "+strings.Join(apply, " "), func(t *testing.T) {
			name := uniqueName("earliest-edited")
			s.mustKubectl(t, append(apply, "-f", writeManifest(t, earliestShapeManifest(name)))...)
			edited := strings.NewReplacer(
				`resources: ["pods", "persistentvolumeclaims"]`, `resources: ["pods"]`,
				`{name: catset-controller, namespace: metacontroller}`, `{name: catset-controller-v2, namespace: metacontroller}`,
				`{path: /sync}`, `{path: /v2/sync}`,
			).Replace(earliestShapeManifest(name))
			stdout, stderr, err := s.kubectl(append(apply, "-f", writeManifest(t, edited))...)
			if err != nil {
				t.Fatalf("kubectl %s of the edited manifest: %v\nstderr:\n%s\nstdout:\n%s", apply, err, stderr, stdout)
			}
			got := getCCYAML(t, s, name)
			want := yamlToMap(t, `
parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
childResources:
- apiVersion: v1
  resource: pods
  updateStrategy: {method: OnDelete, statusChecks: {}}
hooks:
  sync:
    version: v1
    webhook:
      service: {name: catset-controller-v2, namespace: metacontroller, port: 80, protocol: http}
      path: /v2/sync
`)
			if !reflect.DeepEqual(got["spec"], want) {
				t.Errorf("after the edited manifest, kubectl get -o yaml shows spec\n%v\nwant\n%v", got["spec"], want)
			}
			if g := got["metadata"].(map[string]any)["generation"]; g != float64(2) {
				t.Errorf("generation after the edit = %v, want 2", g)
			}
			checkManagedFieldsInTodaysShape(t, s, name)
		})
	}

	t.Run("contradictions are field errors", func(t *testing.T) {
		name := uniqueName("earliest-contradiction")
		manifest := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
    - apiVersion: v1
      resource: pods
      resources: ["pods", "persistentvolumeclaims"]
  clientConfig:
    service: {name: catset-controller, namespace: metacontroller}
  hooks:
    sync: {path: /sync, webhook: {url: "http://catset.example.com/sync"}}
`, name)
		stderr := applyRefused(t, s, "contradicting fields", manifest)
		for _, want := range []string{
			"spec.childResources[0].resources: Forbidden: may not be set with spec.childResources[0].resource",
			"spec.hooks.sync.path: Forbidden: may not be set with spec.hooks.sync.webhook.url",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("kubectl apply did not say %q; stderr:\n%s", want, stderr)
			}
		}
		expectNotFound(t, s, name)
	})
}

// checkManagedFieldsInTodaysShape fails t if a managedFields entry of the
// object names a field of the earliest shape: server-side apply records the
// applied configuration's fields, and the server rewrites them into the
// fields they were stored in.
func checkManagedFieldsInTodaysShape(t *testing.T, s *server, name string) {
	t.Helper()
	var obj struct {
		Metadata struct {
			ManagedFields []struct {
				Manager   string         `json:"manager"`
				Operation string         `json:"operation"`
				FieldsV1  map[string]any `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	raw := s.mustKubectl(t, "get", "cc", name, "-o", "json", "--show-managed-fields")
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		t.Fatalf("kubectl get -o json: %v\n%s", err, raw)
	}
	if len(obj.Metadata.ManagedFields) == 0 {
		t.Fatalf("no managedFields:\n%s", raw)
	}
	for _, mf := range obj.Metadata.ManagedFields {
		fields, _ := json.Marshal(mf.FieldsV1)
		bad := []string{}
		for _, f := range []string{`"f:clientConfig"`, `"f:updateStrategy":{}`, `"f:resources"`, `\"resource\":\"\"`} {
			if strings.Contains(string(fields), f) {
				bad = append(bad, f)
			}
		}
		if dig(mf.FieldsV1, "f:spec", "f:hooks", "f:sync", "f:path") != nil {
			bad = append(bad, "f:hooks.f:sync.f:path")
		}
		if len(bad) > 0 {
			t.Errorf("managedFields of %s (%s) name fields of the earliest shape %q:\n%s", mf.Manager, mf.Operation, bad, fields)
		}
	}
}
