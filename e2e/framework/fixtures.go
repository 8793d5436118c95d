package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// CRD is a CustomResourceDefinition of one served and stored version whose
// objects take any spec and status: the parents and children of the
// end-to-end tests and benchmarks, whose shape the controllers under test
// decide, not a schema.
type CRD struct {
	Group, Plural, Kind string
	// Version is the one version: v1 when empty.
	Version string
	// ClusterScoped makes the objects cluster-scoped; they are namespaced
	// otherwise.
	ClusterScoped bool
	// NoStatus leaves out the status subresource, so that the status is
	// written with the rest of the object.
	NoStatus bool
}

// Manifest is the CRD as YAML to apply.
func (c CRD) Manifest() string {
	version, scope, status := c.Version, "Namespaced", "    subresources: {status: {}}\n"
	if version == "" {
		version = "v1"
	}
	if c.ClusterScoped {
		scope = "Cluster"
	}
	if c.NoStatus {
		status = ""
	}
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]s.%[1]s
spec:
  group: %[1]s
  scope: %[5]s
  names: {plural: %[2]s, singular: %[3]s, kind: %[4]s}
  versions:
  - name: %[6]s
    served: true
    storage: true
%[7]s    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, c.Group, c.Plural, strings.ToLower(c.Kind), c.Kind, scope, version, status)
}

// HelloCRD is the parent resource of the end-to-end tests: hellos.example.com,
// namespaced, with a status subresource and any spec.
var HelloCRD = CRD{Group: "example.com", Plural: "hellos", Kind: "Hello"}.Manifest()

// HelloControllerRights is what an admin grants composite-apiserver for
// controllers of hellos with ConfigMap and Service children, through the
// aggregated ClusterRole of artifacts/deploy/rbac.yaml.
const HelloControllerRights = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: composite-apiserver-hellos
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
- apiGroups: ["example.com"]
  resources: ["hellos"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["example.com"]
  resources: ["hellos/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: [""]
  resources: ["configmaps", "services", "secrets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`

// HelloLoopRules are the rules of a Role or ClusterRole allowing exactly
// what the loop of a controller of hellos with ConfigMap children does
// (and Service children, which HelloController also has): what its author,
// or the ServiceAccount it acts as, needs.
const HelloLoopRules = `rules:
- apiGroups: ["example.com"]
  resources: ["hellos"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["example.com"]
  resources: ["hellos/status"]
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`

// ApplyAsOnceAllowed runs `kubectl apply -f file` as kubeconfig's user until
// it succeeds, for up to 30 seconds: composite-apiserver's delegating
// authorizer remembers a refusal for seconds after a grant. It returns
// the last stderr when it never succeeds.
func (s *Stack) ApplyAsOnceAllowed(ctx context.Context, kubeconfig, file string) (string, error) {
	var lastErr string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		_, stderr, err := s.KubectlAs(ctx, kubeconfig, nil, "apply", "-f", file)
		lastErr = stderr
		return err == nil, nil
	})
	return lastErr, err
}

// Apply runs `kubectl apply` of manifest as the administrator.
func (s *Stack) Apply(ctx context.Context, manifest string, extraArgs ...string) error {
	args := append([]string{"apply", "-f", "-"}, extraArgs...)
	if _, stderr, err := s.KubectlAs(ctx, s.AdminKubeconfig, strings.NewReader(manifest), args...); err != nil {
		return fmt.Errorf("kubectl apply: %w: %s", err, stderr)
	}
	return nil
}

// InstallHellos installs HelloCRD and HelloControllerRights and waits for
// the CRD to be served.
func (s *Stack) InstallHellos(ctx context.Context) error {
	for _, m := range []string{HelloCRD, HelloControllerRights} {
		if err := s.Apply(ctx, m); err != nil {
			return err
		}
	}
	if _, stderr, err := s.Kubectl(ctx, "wait", "--for=condition=Established", "crd/hellos.example.com", "--timeout=60s"); err != nil {
		return fmt.Errorf("CRD hellos.example.com not established: %w: %s", err, stderr)
	}
	return nil
}

// CreateNamespace creates a namespace, or leaves an existing one.
func (s *Stack) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// TimeNamespaceDeletion creates the empty namespace name, deletes it and
// waits up to timeout for it to be gone: a registered APIService that
// nobody answers makes it wait (NamespaceDeletionDiscoveryFailure), which
// the error then shows with the namespace's conditions.
func (s *Stack) TimeNamespaceDeletion(ctx context.Context, name string, timeout time.Duration) (time.Duration, error) {
	namespaces := s.Kube.CoreV1().Namespaces()
	if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := namespaces.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := namespaces.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		var conditions []corev1.NamespaceCondition
		if ns, err := namespaces.Get(ctx, name, metav1.GetOptions{}); err == nil {
			conditions = ns.Status.Conditions
		}
		return time.Since(start), fmt.Errorf("namespace %s not deleted within %s: %w; its conditions: %v", name, timeout, err, conditions)
	}
	return time.Since(start), nil
}

// ControllerFixture is a CompositeController of the hellos labelled
// SelectBy=<Name>, so that each test's controller sees only its own
// parents, with a generated selector and one child resource, its sync hook
// at HookURL/sync. The rolling update tests give it Widget children with a
// rolling method and ReadyChecks.
type ControllerFixture struct {
	Name, HookURL string
	// SelectBy is the key of the parents' label: test when empty.
	SelectBy string
	// Child is the child resource: ConfigMaps when empty.
	Child schema.GroupVersionResource
	// Method is the children's update method: InPlace when empty.
	Method string
	// ReadyChecks makes a rolling update wait for each child it updates to
	// report the condition Ready=True before it goes on.
	ReadyChecks bool
	// Timeout is the sync hook's timeout, as time.ParseDuration reads it:
	// Metacontroller's default when empty.
	Timeout string
	// Spec, when set, edits the spec last: what a test adds to the
	// fixture, checked by the compiler.
	Spec func(*acv1alpha1.CompositeControllerSpecApplyConfiguration)
}

// ApplyConfiguration is the CompositeController.
func (c ControllerFixture) ApplyConfiguration() *acv1alpha1.CompositeControllerApplyConfiguration {
	selectBy, child, method := c.SelectBy, c.Child, c.Method
	if selectBy == "" {
		selectBy = "test"
	}
	if child.Resource == "" {
		child = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	if method == "" {
		method = string(v1alpha1.ChildUpdateInPlace)
	}
	strategy := acv1alpha1.CompositeControllerChildUpdateStrategy().WithMethod(v1alpha1.ChildUpdateMethod(method))
	if c.ReadyChecks {
		strategy.WithStatusChecks(acv1alpha1.ChildUpdateStatusChecks().WithConditions(
			acv1alpha1.StatusConditionCheck().WithType("Ready").WithStatus(string(metav1.ConditionTrue))))
	}
	spec := acv1alpha1.CompositeControllerSpec().
		WithGenerateSelector(true).
		WithParentResource(acv1alpha1.CompositeControllerParentResourceRule().
			WithAPIVersion("example.com/v1").WithResource("hellos").
			WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{selectBy: c.Name}))).
		WithChildResources(acv1alpha1.CompositeControllerChildResourceRule().
			WithAPIVersion(child.GroupVersion().String()).WithResource(child.Resource).
			WithUpdateStrategy(strategy)).
		WithHooks(acv1alpha1.CompositeControllerHooks().WithSync(HookAt(c.HookURL+"/sync", parseTimeout(c.Timeout))))
	if c.Spec != nil {
		c.Spec(spec)
	}
	return acv1alpha1.CompositeController(c.Name).WithSpec(spec)
}

// Manifest is the CompositeController as YAML to apply.
func (c ControllerFixture) Manifest() string {
	return manifest(c.ApplyConfiguration())
}

// DecoratorFixture is a DecoratorController of the hellos and of the
// ConfigMaps annotated attach, both labelled SelectBy=<Name>, with Secret
// attachments updated in place, as e2e/hooks/hook.py's /decorate and
// /decorate-finalize hooks at HookURL answer.
type DecoratorFixture struct {
	Name, HookURL string
	// SelectBy is the key of the decorated objects' label: test when empty.
	SelectBy string
	// NoFinalize declares no finalize hook: a decorated object takes no
	// finalizer, and its attachments are left to the garbage collector
	// when it goes.
	NoFinalize bool
	// Spec, when set, edits the spec last: what a test adds to the
	// fixture, checked by the compiler.
	Spec func(*acv1alpha1.DecoratorControllerSpecApplyConfiguration)
}

// ApplyConfiguration is the DecoratorController.
func (d DecoratorFixture) ApplyConfiguration() *acv1alpha1.DecoratorControllerApplyConfiguration {
	selectBy := d.SelectBy
	if selectBy == "" {
		selectBy = "test"
	}
	selected := func() *metav1ac.LabelSelectorApplyConfiguration {
		return metav1ac.LabelSelector().WithMatchLabels(map[string]string{selectBy: d.Name})
	}
	hooks := acv1alpha1.DecoratorControllerHooks().
		WithSync(HookAt(d.HookURL+"/decorate", 3*time.Second).WithVersion(v1alpha1.HookVersionV2))
	if !d.NoFinalize {
		hooks.WithFinalize(HookAt(d.HookURL+"/decorate-finalize", 3*time.Second).WithVersion(v1alpha1.HookVersionV2))
	}
	spec := acv1alpha1.DecoratorControllerSpec().
		WithResources(
			acv1alpha1.DecoratorControllerResourceRule().WithAPIVersion("example.com/v1").WithResource("hellos").
				WithLabelSelector(selected()),
			acv1alpha1.DecoratorControllerResourceRule().WithAPIVersion("v1").WithResource("configmaps").
				WithLabelSelector(selected()).
				WithAnnotationSelector(acv1alpha1.AnnotationSelector().WithMatchExpressions(
					metav1ac.LabelSelectorRequirement().WithKey("attach").WithOperator(metav1.LabelSelectorOpExists)))).
		WithAttachments(acv1alpha1.DecoratorControllerAttachmentRule().WithAPIVersion("v1").WithResource("secrets").
			WithUpdateStrategy(acv1alpha1.DecoratorControllerAttachmentUpdateStrategy().WithMethod(v1alpha1.ChildUpdateInPlace))).
		WithHooks(hooks)
	if d.Spec != nil {
		d.Spec(spec)
	}
	return acv1alpha1.DecoratorController(d.Name).WithSpec(spec)
}

// Manifest is the DecoratorController as YAML to apply.
func (d DecoratorFixture) Manifest() string {
	return manifest(d.ApplyConfiguration())
}

// HookAt is a hook calling the webhook at url, within timeout unless it is
// zero (then Metacontroller's default).
func HookAt(url string, timeout time.Duration) *acv1alpha1.HookApplyConfiguration {
	webhook := acv1alpha1.Webhook().WithURL(url)
	if timeout != 0 {
		webhook.WithTimeout(metav1.Duration{Duration: timeout})
	}
	return acv1alpha1.Hook().WithWebhook(webhook)
}

// parseTimeout reads a fixture's Timeout, zero when empty. A timeout that
// does not parse is the test's own mistake, so it panics rather than
// making every Manifest return an error.
func parseTimeout(timeout string) time.Duration {
	if timeout == "" {
		return 0
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		panic(fmt.Sprintf("fixture timeout %q: %v", timeout, err))
	}
	return d
}

// manifest is config as YAML. YAML, not JSON, though kubectl takes
// either: tests outside the fixtures still edit the text (a label inserted
// after "  name: <name>\n", a field appended to the spec, which sorts
// last), and the keys of the YAML come sorted, so the spec's fields end
// it. A config that does not marshal is the fixture's own mistake: it
// panics.
func manifest(config any) string {
	out, err := yaml.Marshal(config)
	if err != nil {
		panic(err)
	}
	return string(out)
}
