package standalone

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// Metacontroller's decorator examples apply unchanged, without warnings,
// read back as written (defaults added), and print in `kubectl get dec`.
func TestMetacontrollerDecoratorExamplesApply(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, ex := range framework.MetacontrollerDecorators {
		t.Run(ex.Name, func(t *testing.T) {
			stdout := applyExample(t, s, ex.Manifest)
			docs := splitYAMLDocuments(t, ex.Manifest)
			for i, name := range ex.Objects {
				if want := "decoratorcontroller.metacontroller.k8s.io/" + name + " created"; !strings.Contains(stdout, want) {
					t.Errorf("kubectl apply did not print %q:\n%s", want, stdout)
				}
				got := yamlToMap(t, s.mustKubectl(t, "get", "dec", name, "-o", "yaml"))
				checkSubset(t, "spec", docs[i]["spec"], got["spec"])
				if out := s.mustKubectl(t, "get", "metacontroller", "-o", "name"); !strings.Contains(out, "decoratorcontroller.metacontroller.k8s.io/"+name+"\n") {
					t.Errorf("kubectl get metacontroller -o name does not list %s:\n%s", name, out)
				}
				row := parseTable(t, s.mustKubectl(t, "get", "decorators", name)).row(t, name)
				if row["READY"] != "Unknown" || row["OBJECTS"] != "0" || !strings.HasPrefix(row["SYNC HOOK"], "http://") {
					t.Errorf("kubectl get decorators %s printed %v", name, row)
				}
			}
		})
	}
}

// A DecoratorController's mistakes are field errors, all at once.
func TestInvalidDecoratorIsRejectedNamingEveryBrokenField(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	stderr := applyRefused(t, s, "an invalid DecoratorController", decHead(uniqueName("bad-decorator"))+`  - apiVersion: v1
    resource: configmaps
    annotationSelector:
      matchExpressions:
      - {key: team, operator: Near}
  attachments:
  - apiVersion: v1
    resource: secrets
    updateStrategy: {method: Sometimes}
  hooks:
    finalize:
      webhook: {url: "ftp://hooks.example.com/finalize"}
`)
	for _, want := range []string{
		"spec.resources[0].annotationSelector.matchExpressions[0].operator",
		`spec.attachments[0].updateStrategy.method: Unsupported value: "Sometimes"`,
		"spec.hooks.sync: Required value",
		"spec.hooks.finalize.webhook.url",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error does not name %q:\n%s", want, stderr)
		}
	}
}

// A resource listed twice, even in two versions of its group, is refused
// naming the second entry: each entry would run a loop of its own on the
// same objects (T7).
func TestDecoratorListingAResourceTwiceIsRejected(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	stderr := applyRefused(t, s, "a DecoratorController listing hellos.example.com twice", decHead(uniqueName("twice"))+`  - apiVersion: example.com/v1
    resource: hellos
    labelSelector: {matchLabels: {tier: web}}
  - apiVersion: v1
    resource: configmaps
  - apiVersion: example.com/v1beta1
    resource: hellos
    labelSelector: {matchLabels: {tier: db}}
  attachments:
  - apiVersion: v1
    resource: secrets
  hooks:
    sync:
      webhook: {url: "http://hooks.example.com/sync"}
`)
	if want := `spec.resources[2]: Duplicate value: "hellos.example.com": already listed at spec.resources[0]`; !strings.Contains(stderr, want) {
		t.Errorf("the error does not say %q:\n%s", want, stderr)
	}
}

func TestKubectlExplainDecoratorController(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	out := s.mustKubectl(t, "explain", "decoratorcontroller.spec")
	for _, want := range []string{"resources", "attachments", "hooks", "resyncPeriodSeconds", "endpointConfigs"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain decoratorcontroller.spec does not say %q:\n%s", want, out)
		}
	}
	out = s.mustKubectl(t, "explain", "dec.spec.resources.annotationSelector")
	if !strings.Contains(out, "matchAnnotations") {
		t.Errorf("kubectl explain dec.spec.resources.annotationSelector:\n%s", out)
	}
}

// A DecoratorController's /sync?dryRun=All previews an inline object: what
// its hook sets on it (labels, a null one removed, annotations) and the
// plan of its attachments, and shows the request the hook got. An object
// of none of its resources is refused, naming them.
func TestDryRunSyncOfADecoratedObject(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	hook := startHook(t)
	name := uniqueName("decorate-preview")
	s.mustKubectl(t, "create", "-f", writeManifest(t, decHead(name)+fmt.Sprintf(`  - apiVersion: example.com/v1
    resource: hellos
  - apiVersion: v1
    resource: configmaps
  attachments:
  - apiVersion: v1
    resource: secrets
  hooks:
    sync:
      version: v2
      webhook:
        url: %s/decorate
`, hook.URL)))
	request := `{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "SyncRequest", "spec": {
  "parent": {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "c", "namespace": "default", "uid": "c-uid", "labels": {"stale": "yes"},
                          "annotations": {"attach": "x", "drop-label": "stale"}}},
  "children": {"Secret.v1": {"default/c-old": {"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "c-old", "namespace": "default", "annotations": {"metacontroller.k8s.io/decorator-controller": "` + name + `"}}}}}}}`
	out := s.mustKubectl(t, "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/decoratorcontrollers/"+name+"/sync?dryRun=All", "-f", writeManifest(t, request))
	var answer struct {
		Status struct {
			ParentLabels      map[string]*string `json:"parentLabels"`
			ParentAnnotations map[string]*string `json:"parentAnnotations"`
			Plan              []struct{ Kind, Name, Action string }
			HookRequest       map[string]any `json:"hookRequest"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, out)
	}
	st := answer.Status
	if v, has := st.ParentLabels["stale"]; !has || v != nil || st.ParentLabels["decorated"] == nil || *st.ParentLabels["decorated"] != "yes" {
		t.Errorf("parentLabels %v: want decorated=yes and stale null", st.ParentLabels)
	}
	if a := st.ParentAnnotations["decorated-by"]; a == nil || *a != "hook.py" {
		t.Errorf("parentAnnotations %v", st.ParentAnnotations)
	}
	plan := map[string]string{}
	for _, item := range st.Plan {
		plan[item.Kind+"/"+item.Name] = item.Action
	}
	if plan["Secret/c-x"] != "Create" || plan["Secret/c-old"] != "Delete" || len(plan) != 2 {
		t.Errorf("plan %v: want Secret c-x created and c-old deleted", plan)
	}
	if _, ok := st.HookRequest["object"]; !ok || st.HookRequest["attachments"] == nil || st.HookRequest["parent"] != nil {
		t.Errorf("the hook request is not a decorator's: %v", st.HookRequest)
	}

	pod := `{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "SyncRequest", "spec": {
  "parent": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}}}`
	_, stderr, err := s.kubectl("create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/decoratorcontrollers/"+name+"/sync?dryRun=All", "-f", writeManifest(t, pod))
	if err == nil || !strings.Contains(stderr, "decorates hellos (example.com/v1), configmaps (v1), not Pod of v1") {
		t.Errorf("a Pod, which it does not decorate: %v\n%s", err, stderr)
	}
}

// decHead is a DecoratorController named name, up to the items of its
// resources.
func decHead(name string) string {
	return `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: ` + name + `
spec:
  resources:
`
}

// applyRefused runs kubectl apply of manifest, which must fail (what names
// the manifest in the failure), and returns kubectl's error output.
func applyRefused(t *testing.T, s *server, what, manifest string) string {
	t.Helper()
	stdout, stderr, err := s.kubectl("apply", "-f", writeManifest(t, manifest))
	if err == nil {
		t.Fatalf("kubectl apply accepted %s; stdout:\n%s", what, stdout)
	}
	return stderr
}
