package standalone

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// metacontrollerStyleManifest is a CompositeController written the way
// Metacontroller's docs and examples write them, using what Metacontroller
// accepts but this server once rejected: preUpdateChild and postUpdateChild
// hooks, a timeout over 30s, status checks with a method that is not rolling,
// and a hook URL with a query. %s is the name.
const metacontrollerStyleManifest = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource:
    apiVersion: ctl.example.com/v1
    resource: widgets
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
      statusChecks:
        conditions:
        - type: Ready
          status: "True"
  hooks:
    sync:
      webhook:
        url: http://widget-controller.metacontroller/sync?tenant=blue&format=v1
        timeout: 45s
    preUpdateChild:
      webhook:
        url: http://widget-controller.metacontroller/pre-update-child
    postUpdateChild:
      webhook:
        url: http://widget-controller.metacontroller/post-update-child
`

func TestMetacontrollerManifestAppliesWithWarnings(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)

	// Each warning kubectl must print, by field path and a part of its
	// message: the object is accepted, and where this server differs from
	// what the manifest may expect, kubectl says so.
	wantWarnings := []struct{ field, text string }{
		{"spec.hooks.sync.webhook.timeout", "45s is used as given"},
		{"spec.childResources[0].updateStrategy.statusChecks", `ignored with method "InPlace"`},
		{"spec.hooks.preUpdateChild", "never called"},
		{"spec.hooks.postUpdateChild", "never called"},
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"apply", []string{"apply"}, "created"},
		{"server-side apply", []string{"apply", "--server-side"}, "serverside-applied"},
		{"create", []string{"create"}, "created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("mc-style-" + strings.ReplaceAll(tc.name, " ", "-"))
			manifest := fmt.Sprintf(metacontrollerStyleManifest, name)
			stdout, stderr, err := s.kubectl(append(tc.args, "-f", writeManifest(t, manifest))...)
			if err != nil {
				t.Fatalf("kubectl %s rejected a manifest Metacontroller accepts: %v\nstderr:\n%s\nstdout:\n%s", tc.args, err, stderr, stdout)
			}
			if want := "compositecontroller.metacontroller.k8s.io/" + name + " " + tc.want; strings.TrimSpace(stdout) != want {
				t.Errorf("kubectl %s printed %q, want %q", tc.args, stdout, want)
			}

			warnings := warningLines(stderr)
			for _, w := range wantWarnings {
				if !hasWarning(warnings, w.field, w.text) {
					t.Errorf("kubectl printed no warning at %s saying %q; stderr:\n%s", w.field, w.text, stderr)
				}
			}
			// The query is kept and called as given: nothing to warn about.
			if hasWarning(warnings, "spec.hooks.sync.webhook.url", "") {
				t.Errorf("kubectl printed a warning about the sync url; stderr:\n%s", stderr)
			}
			if len(warnings) != len(wantWarnings) {
				t.Errorf("kubectl printed %d warnings, want %d:\n%s", len(warnings), len(wantWarnings), strings.Join(warnings, "\n"))
			}

			// What is read back holds every field of the manifest, with the
			// same value: nothing was dropped or rewritten.
			got := getCCYAML(t, s, name)
			checkSubset(t, "spec", yamlToMap(t, manifest)["spec"], got["spec"])
			spec := got["spec"].(map[string]any)
			hooks := spec["hooks"].(map[string]any)
			if url := dig(hooks, "sync", "webhook", "url"); url != "http://widget-controller.metacontroller/sync?tenant=blue&format=v1" {
				t.Errorf("sync url read back as %v", url)
			}
			if timeout := dig(hooks, "sync", "webhook", "timeout"); timeout != "45s" {
				t.Errorf("sync timeout read back as %v", timeout)
			}
			for _, h := range []string{"preUpdateChild", "postUpdateChild"} {
				// Defaulted like every other hook.
				if v := dig(hooks, h, "version"); v != "v1" {
					t.Errorf("%s version read back as %v, want the default v1", h, v)
				}
			}
		})
	}

	t.Run("apply again is unchanged", func(t *testing.T) {
		name := uniqueName("mc-style-reapply")
		path := writeManifest(t, fmt.Sprintf(metacontrollerStyleManifest, name))
		s.mustKubectl(t, "apply", "-f", path)
		stdout, stderr, err := s.kubectl("apply", "-f", path)
		if err != nil {
			t.Fatalf("second kubectl apply: %v\nstderr:\n%s", err, stderr)
		}
		if want := "compositecontroller.metacontroller.k8s.io/" + name + " unchanged"; strings.TrimSpace(stdout) != want {
			t.Errorf("second kubectl apply printed %q, want %q; stderr:\n%s", stdout, want, stderr)
		}
	})
}

// metacontrollerExamples are the CompositeControllers of Metacontroller's own
// examples, copied as they are from examples/*/manifest/ of
// github.com/metacontroller/metacontroller (the other objects of those files,
// Deployments and Services for the hooks, are left out: this server serves
// only CompositeControllers).
var metacontrollerExamples = []struct {
	name     string
	manifest string
	// objects are the names of the CompositeControllers in manifest.
	objects []string
}{
	{
		name:    "examples/catset/manifest/catset-controller.yaml",
		objects: []string{"catset-controller"},
		manifest: `---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: catsets
    revisionHistory:
      fieldPaths:
      - spec.template
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - type: Ready
          status: "True"
  - apiVersion: v1
    resource: persistentvolumeclaims
  hooks:
    sync:
      webhook:
        url: http://catset-controller.metacontroller/sync
    finalize:
      webhook:
        url: http://catset-controller.metacontroller/sync
`,
	},
	{
		name:    "examples/bluegreen/manifest/bluegreen-controller.yaml",
		objects: []string{"bluegreen-controller"},
		manifest: `---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: bluegreen-controller
spec:
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: bluegreendeployments
  childResources:
  - apiVersion: v1
    resource: services
    updateStrategy:
      method: InPlace
  - apiVersion: apps/v1
    resource: replicasets
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: http://bluegreen-controller.metacontroller/sync
`,
	},
	{
		name:    "examples/update-strategy/manifest/update-strategy-controllers.yaml",
		objects: []string{"on-delete-demo-controller", "recreate-demo-controller"},
		manifest: `---
# CompositeController for OnDelete strategy
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: on-delete-demo-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: ctl.example.com/v1
    resource: ondeletedemos
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy:
        method: OnDelete
  hooks:
    sync:
      webhook:
        url: http://update-strategy-controller.metacontroller/sync
---
# CompositeController for Recreate strategy
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: recreate-demo-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: ctl.example.com/v1
    resource: recreatedemos
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy:
        method: Recreate
  hooks:
    sync:
      webhook:
        url: http://update-strategy-controller.metacontroller/sync
`,
	},
}

func TestMetacontrollerExampleManifestsApply(t *testing.T) {
	t.Parallel()
	// The examples keep their names as written; no other test uses those
	// names, and each is deleted afterwards so that -count=N applies it
	// anew.
	s := sharedServer(t)
	for _, ex := range metacontrollerExamples {
		t.Run(ex.name, func(t *testing.T) {
			stdout := applyExample(t, s, ex.manifest)

			docs := splitYAMLDocuments(t, ex.manifest)
			if len(docs) != len(ex.objects) {
				t.Fatalf("manifest has %d objects, want %d", len(docs), len(ex.objects))
			}
			for i, name := range ex.objects {
				if want := "compositecontroller.metacontroller.k8s.io/" + name + " created"; !strings.Contains(stdout, want) {
					t.Errorf("kubectl apply did not print %q:\n%s", want, stdout)
				}
				checkSubset(t, "spec", docs[i]["spec"], getCCYAML(t, s, name)["spec"])
			}
		})
	}
}

// applyExample applies one of Metacontroller's examples, deleted after the
// test, and returns what kubectl printed. The examples are what
// Metacontroller's authors recommend: nothing in them deserves a warning.
func applyExample(t *testing.T, s *server, manifest string) string {
	t.Helper()
	path := writeManifest(t, manifest)
	t.Cleanup(func() {
		if _, stderr, err := s.kubectl("delete", "--ignore-not-found", "-f", path); err != nil {
			t.Errorf("kubectl delete: %v\n%s", err, stderr)
		}
	})
	stdout, stderr, err := s.kubectl("apply", "-f", path)
	if err != nil {
		t.Fatalf("kubectl apply rejected Metacontroller's example: %v\nstderr:\n%s\nstdout:\n%s", err, stderr, stdout)
	}
	if w := warningLines(stderr); len(w) > 0 {
		t.Errorf("kubectl apply printed warnings for Metacontroller's example:\n%s", strings.Join(w, "\n"))
	}
	return stdout
}

// warningLines are the warnings kubectl printed, without their "Warning: "
// prefix.
func warningLines(stderr string) []string {
	var warnings []string
	for _, line := range strings.Split(stderr, "\n") {
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "Warning: "); ok {
			warnings = append(warnings, w)
		}
	}
	return warnings
}

// hasWarning reports whether a warning is about field (its path, then ": ")
// and contains text.
func hasWarning(warnings []string, field, text string) bool {
	for _, w := range warnings {
		if strings.HasPrefix(w, field+": ") && strings.Contains(w, text) {
			return true
		}
	}
	return false
}

// getCCYAML reads a CompositeController back with `kubectl get -o yaml`.
func getCCYAML(t *testing.T, s *server, name string) map[string]any {
	t.Helper()
	return yamlToMap(t, s.mustKubectl(t, "get", "cc", name, "-o", "yaml"))
}

func yamlToMap(t *testing.T, doc string) map[string]any {
	t.Helper()
	raw, err := utilyaml.ToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("can't parse YAML: %v\n%s", err, doc)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("can't parse YAML: %v\n%s", err, doc)
	}
	return m
}

// splitYAMLDocuments parses a multi-document YAML stream, skipping empty
// documents.
func splitYAMLDocuments(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, doc := range strings.Split(stream, "\n---") {
		if m := yamlToMap(t, doc); m != nil {
			docs = append(docs, m)
		}
	}
	return docs
}

// checkSubset fails t for every value of want that got does not hold at the
// same place: got may have more (defaults), but nothing of want may be
// missing or different. Lists must have the same length.
func checkSubset(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %v, want an object", path, got)
			return
		}
		for k, v := range w {
			checkSubset(t, path+"."+k, v, g[k])
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: got %v, want a list of %d", path, got, len(w))
			return
		}
		for i := range w {
			checkSubset(t, fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
		}
	default:
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: read back as %v, want %v", path, got, want)
		}
	}
}

// dig returns the value at path in nested objects, or nil.
func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}
