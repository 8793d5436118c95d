package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HelloCRD is the parent resource of the end-to-end tests: hellos.example.com,
// namespaced, with a status subresource and any spec.
const HelloCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: hellos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: hellos, singular: hello, kind: Hello}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

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

// HelloController is a CompositeController of hellos with ConfigMap and
// Service children, its sync hook at hookURL/sync; method is the ConfigMaps'
// update strategy. extraSpec is appended to the spec, indented.
func HelloController(name, hookURL, method, extraSpec string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.com/v1
    resource: hellos
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: %s
  - apiVersion: v1
    resource: services
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: %s/sync
        timeout: 5s
%s`, name, method, hookURL, extraSpec)
}
