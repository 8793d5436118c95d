package framework

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What several e2e packages did each in their own words: apply a manifest
// or fail, and apply a controller that goes when the test ends.

// MustApply applies manifest as the administrator, failing t if kubectl
// cannot.
func (s *Suite) MustApply(t testing.TB, manifest string) {
	t.Helper()
	if err := s.Apply(context.Background(), manifest); err != nil {
		t.Fatal(err)
	}
}

// MustCreateNamespace creates the namespace ns, or leaves an existing one
// (unlike Namespace, it keeps the name and the namespace after t).
func (s *Suite) MustCreateNamespace(t testing.TB, ns string) {
	t.Helper()
	if err := s.CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// ApplyController applies manifest, which holds the CompositeController
// name, and deletes that controller when t ends, so that its loop stops
// with the test that made it.
func (s *Suite) ApplyController(t testing.TB, name, manifest string) {
	t.Helper()
	s.MustApply(t, manifest)
	t.Cleanup(func() {
		_ = s.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// ApplyDecorator is ApplyController for the DecoratorController name.
func (s *Suite) ApplyDecorator(t testing.TB, name, manifest string) {
	t.Helper()
	s.MustApply(t, manifest)
	t.Cleanup(func() {
		_ = s.Client.MetacontrollerV1alpha1().DecoratorControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// AggregatedRights is the ClusterRole name, aggregated into
// composite-apiserver's own (artifacts/deploy/rbac.yaml), with rules (the
// YAML items of its rules list): what an administrator grants the server
// for a controller's parents and children, as the README says.
func AggregatedRights(name, rules string) string {
	return `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ` + name + `
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
` + rules
}

// ReadFile is the content of the file at path, failing t if it cannot be
// read.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// HelloHook is SetUpHellos and a Hook of the test's own: where most tests
// of a controller of hellos start.
func (s *Suite) HelloHook(t testing.TB) *PythonHook {
	t.Helper()
	s.SetUpHellos(t)
	return s.Hook(t)
}

// MustStartReplica is StartReplica, failing t if the replica does not
// start. The caller stops it, when its test is done with it.
func (s *Suite) MustStartReplica(t testing.TB, ctx context.Context, name string, extraArgs ...string) *Process {
	t.Helper()
	p, err := s.StartReplica(ctx, name, extraArgs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
