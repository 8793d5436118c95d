package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// A controller the server has no rights for says so where the user looks —
// a warning on apply, Ready=False with reason Forbidden naming what is
// missing, a Warning Event — and starts by itself once the rights are
// granted, with no restart and no edit.
func TestMissingRightsAreVisibleAndGrantingThemStartsTheLoop(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "rights")
	// A CRD, and no rights for the server on it.
	crd := framework.CRD{Group: "rights.example.com", Plural: "gizmos", Kind: "Gizmo"}.Manifest()
	suite.MustApply(t, crd)
	if _, stderr, err := suite.Kubectl(context.Background(), "wait", "--for=condition=Established", "crd/gizmos.rights.example.com", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	manifest := filepath.Join(t.TempDir(), "cc.yaml")
	if err := os.WriteFile(manifest, []byte(parityController("rights", "gizmos", hook.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	// parityController names parity.example.com: point it at this CRD.
	data, _ := os.ReadFile(manifest)
	if err := os.WriteFile(manifest, []byte(strings.ReplaceAll(string(data), "parity.example.com/v1", "rights.example.com/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), "rights", metav1.DeleteOptions{})
	})
	_, stderr, err := suite.Kubectl(context.Background(), "apply", "-f", manifest)
	if err != nil {
		t.Fatalf("apply: %v: %s", err, stderr)
	}
	if !strings.Contains(stderr, "Warning: composite-apiserver may not") || !strings.Contains(stderr, "gizmos.rights.example.com") ||
		!strings.Contains(stderr, "kubectl composite rbac rights") {
		t.Errorf("kubectl apply printed no warning naming the missing rights and the fix:\n%s", stderr)
	}
	suite.Eventually(t, "Ready=False Forbidden naming gizmos", func() (bool, error) {
		c := meta.FindStatusCondition(ccReady(t, "rights").Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Forbidden" &&
			strings.Contains(c.Message, "list, watch") && strings.Contains(c.Message, "gizmos.rights.example.com"), nil
	})
	waitControllerEvent(t, ccUID(t, "rights"), "Forbidden", "composite-apiserver may not")
	described, stderr, err := suite.Kubectl(context.Background(), "describe", "compositecontroller", "rights")
	if err != nil {
		t.Fatalf("describe: %v: %s", err, stderr)
	}
	for _, want := range []string{"Conditions:", "Forbidden", "kubectl composite rbac rights", "Last Sync Error:"} {
		if !strings.Contains(described, want) {
			t.Errorf("kubectl describe cc rights does not show %q:\n%s", want, described)
		}
	}

	// Create a parent now: nothing happens to it until the rights come.
	gizmos := schema.GroupVersionResource{Group: "rights.example.com", Version: "v1", Resource: "gizmos"}
	if _, err := suite.Dynamic.Resource(gizmos).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "rights.example.com/v1", "kind": "Gizmo",
		"metadata": map[string]interface{}{"name": "g", "namespace": ns},
		"spec":     framework.HelloSpec("blue", "a"),
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The admin does what the message says, with the real kubectl finding
	// the plugin on PATH.
	pluginDir, err := framework.BuildKubectlPlugin()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(pipe string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", pipe)
		cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+suite.AdminKubeconfig)
		return cmd
	}
	// Taken back when the test ends (before its controller is deleted,
	// which the plugin reads), so that another run of it (go test -count)
	// starts again without the rights.
	t.Cleanup(func() {
		if out, err := kubectl("kubectl composite rbac rights | kubectl delete --ignore-not-found -f -").CombinedOutput(); err != nil {
			t.Errorf("taking the rights back: %v\n%s", err, out)
		}
	})
	if out, err := kubectl("kubectl composite rbac rights | kubectl apply -f -").CombinedOutput(); err != nil {
		t.Fatalf("kubectl composite rbac rights | kubectl apply -f -: %v\n%s", err, out)
	}
	suite.Eventually(t, "controller rights Ready after the grant", func() (bool, error) {
		return meta.IsStatusConditionTrue(ccReady(t, "rights").Status.Conditions, v1alpha1.ConditionReady), nil
	})
	suite.WaitConfigMaps(t, ns, "g-a")
}
