package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFinalizedParentWhoseChildCantBeDeletedIsNotStuck: the finalize hook
// answers finalized, but kube-apiserver refuses to delete the parent's
// child (a ValidatingAdmissionPolicy here, an admission webhook in real
// life). The parent is told so (FinalizeIncomplete, naming when the
// finalizer goes), the deletes are retried, and past --finalize-grace the
// finalizer is removed anyway (FinalizerRemoved): the parent goes, and the
// garbage collector deletes the child once it may.
func TestFinalizedParentWhoseChildCantBeDeletedIsNotStuck(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	hook := suite.HelloHook(t)
	ctx := context.Background()
	suite.RestartWith(t, "--finalize-grace=5s")
	const ctrl = "finalize-grace"
	ns := suite.Namespace(t, ctrl)
	finalizer := "metacontroller.io/compositecontroller-" + ctrl
	framework.HelloController{Name: ctrl, HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithFinalize(framework.HookAt(hook.URL+"/finalize", 0))
	}}.Create(t, suite)
	suite.CreateHello(t, ns, "p", ctrl, framework.HelloSpec("blue", "a"))
	suite.WaitConfigMaps(t, ns, "p-a")
	suite.Eventually(t, "the finalizer on the parent", func() (bool, error) {
		for _, f := range suite.GetHello(t, ns, "p").GetFinalizers() {
			if f == finalizer {
				return true, nil
			}
		}
		return false, nil
	})

	const message = "configmaps are kept by the test"
	release := refuse(t, ns, "", "configmaps", "DELETE", message)
	suite.Eventually(t, "kube-apiserver to refuse ConfigMap deletes", func() (bool, error) {
		err := suite.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "p-a", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), message), nil
	})

	if err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.WaitForEvent(t, ns, "p", "FinalizeIncomplete", finalizer+" is removed anyway at", time.Minute)
	suite.Eventually(t, "the parent gone once the grace is over", func() (bool, error) {
		_, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	suite.WaitForEvent(t, ns, "p", "FinalizerRemoved", "the garbage collector deletes what the parent owns", time.Minute)
	if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("the child the policy keeps: %v", err)
	}
	release()
	// The garbage collector deletes it through its ownerReference.
	suite.WaitConfigMaps(t, ns)
}
