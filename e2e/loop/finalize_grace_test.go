package loop

import (
	"context"
	"strings"
	"testing"
	"time"

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
	hook := setUp(t)
	ctx := context.Background()
	restartWith(t, "--finalize-grace=5s")
	const ctrl = "finalize-grace"
	ns := namespace(t, ctrl)
	finalizer := "metacontroller.io/compositecontroller-" + ctrl
	controller{Name: ctrl, HookURL: hook.URL, Hooks: "    finalize:\n      webhook:\n        url: " + hook.URL + "/finalize\n"}.create(t)
	createParent(t, ns, "p", ctrl, spec("blue", "a"))
	waitConfigMaps(t, ns, "p-a")
	eventually(t, "the finalizer on the parent", func() (bool, error) {
		for _, f := range getParent(t, ns, "p").GetFinalizers() {
			if f == finalizer {
				return true, nil
			}
		}
		return false, nil
	})

	const message = "configmaps are kept by the test"
	release := refuse(t, ns, "", "configmaps", "DELETE", message)
	eventually(t, "kube-apiserver to refuse ConfigMap deletes", func() (bool, error) {
		err := stack.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "p-a", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), message), nil
	})

	if err := dyn.Resource(hellos).Namespace(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.WaitForEvent(t, ns, "p", "FinalizeIncomplete", finalizer+" is removed anyway at", time.Minute)
	eventually(t, "the parent gone once the grace is over", func() (bool, error) {
		_, err := dyn.Resource(hellos).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	stack.WaitForEvent(t, ns, "p", "FinalizerRemoved", "the garbage collector deletes what the parent owns", time.Minute)
	if _, err := stack.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("the child the policy keeps: %v", err)
	}
	release()
	// The garbage collector deletes it through its ownerReference.
	waitConfigMaps(t, ns)
}
