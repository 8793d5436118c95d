package standalone

import (
	"strings"
	"testing"
)

// metacontrollerDecorators are the DecoratorControllers of Metacontroller's
// examples, verbatim from github.com/metacontroller/metacontroller (the
// hooks' Deployments and Services are left out: they need a cluster).
var metacontrollerDecorators = []struct {
	name     string
	manifest string
	objects  []string
}{
	{
		name:    "service-per-pod",
		objects: []string{"service-per-pod", "pod-name-label"},
		manifest: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-pod
spec:
  resources:
  - apiVersion: apps/v1
    resource: statefulsets
    annotationSelector:
      matchExpressions:
      - {key: service-per-pod-label, operator: Exists}
      - {key: service-per-pod-ports, operator: Exists}
  attachments:
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook:
        url: http://service-per-pod.metacontroller/sync-service-per-pod
    finalize:
      webhook:
        url: http://service-per-pod.metacontroller/finalize-service-per-pod
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: pod-name-label
spec:
  resources:
  - apiVersion: v1
    resource: pods
    labelSelector:
      matchExpressions:
      - {key: pod-name, operator: DoesNotExist}
    annotationSelector:
      matchExpressions:
      - {key: pod-name-label, operator: Exists}
  hooks:
    sync:
      webhook:
        url: http://service-per-pod.metacontroller/sync-pod-name-label
`,
	},
	{
		name:    "crd-roles",
		objects: []string{"crd-role-controller"},
		manifest: `---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: crd-role-controller
spec:
  resources:
   - apiVersion: apiextensions.k8s.io/v1
     resource: customresourcedefinitions
     annotationSelector:
       matchExpressions:
        - {key: enable-default-roles, operator: Exists}
  attachments:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
  hooks:
    sync:
      webhook:
        url: http://crd-role-controller.metacontroller/sync-crd-role
        timeout: 10s`,
	},
	{
		name:    "clusteredparent",
		objects: []string{"cluster-parent"},
		manifest: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: cluster-parent
spec:
  resources:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
    annotationSelector:
      matchExpressions:
      - {key: default-service-account-binding, operator: Exists}
  attachments:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: rolebindings
  hooks:
    sync:
      webhook:
        url: http://cluster-parent-controller.metacontroller/sync
`,
	},
}

// Metacontroller's decorator examples apply unchanged, without warnings,
// read back as written (defaults added), and print in `kubectl get dec`.
func TestMetacontrollerDecoratorExamplesApply(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, ex := range metacontrollerDecorators {
		t.Run(ex.name, func(t *testing.T) {
			path := writeManifest(t, ex.manifest)
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
			docs := splitYAMLDocuments(t, ex.manifest)
			for i, name := range ex.objects {
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
	path := writeManifest(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: `+uniqueName("bad-decorator")+`
spec:
  resources:
  - apiVersion: v1
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
	_, stderr, err := s.kubectl("apply", "-f", path)
	if err == nil {
		t.Fatal("kubectl apply accepted an invalid DecoratorController")
	}
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
