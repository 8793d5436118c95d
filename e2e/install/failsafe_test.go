package install

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestAFailedInstallLeavesNamespaceDeletionWorking installs the chart as
// the README's "Install" says, but the server never becomes ready (no
// kubelet runs its pods here, as an image that can't be pulled or an etcd
// that can't be reached would leave them): namespaces anywhere in the
// cluster are still deleted. An APIService registered with nobody behind it
// would make kube-controller-manager's namespace controller wait on our
// group's discovery (NamespaceDeletionDiscoveryFailure) for as long as the
// install stays broken.
//
// Not yet passing: issue 31 item 2 (registering the APIService only once a
// replica is ready) is still to be built. On the chart of today the
// namespace waits the whole two minutes, NamespaceDeletionDiscoveryFailure
// "stale GroupVersion discovery: metacontroller.k8s.io/v1alpha1".
func TestAFailedInstallLeavesNamespaceDeletionWorking(t *testing.T) {
	t.Skip("issue 31 item 2 is not built yet: remove this skip with it")
	stack.DumpLogsOnFailure(t)
	ctx := context.Background()
	// The stack's own registration goes for the install's, and comes back
	// at the end.
	stack.Disrupted()
	apiServices := stack.Aggregator.ApiregistrationV1().APIServices()
	if err := apiServices.Delete(ctx, framework.APIServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const release, namespace = "failsafe", "failsafe-system"
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	helm := func(args ...string) {
		t.Helper()
		if out, err := framework.HelmAgainst(stack.AdminKubeconfig, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := framework.HelmAgainst(stack.AdminKubeconfig, "uninstall", release, "-n", namespace, "--wait", "--timeout=60s"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
		if err := stack.RegisterAPIService(ctx); err != nil {
			t.Fatalf("can't register the stack's APIService again: %v", err)
		}
		stack.Recovered()
	})
	// Its own names: the stack's server identity holds the chart's default
	// ones.
	helm("install", release, chart, "--namespace", namespace, "--create-namespace",
		"--set", "image.repository=registry.invalid/composite-apiserver", "--set", "image.tag=never-pulled",
		"--set", "fullnameOverride=failsafe-apiserver")

	const victim = "failsafe-victim"
	if _, err := stack.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victim}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := stack.Kube.CoreV1().Namespaces().Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Generous: an empty namespace goes in about a second.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stack.Kube.CoreV1().Namespaces().Get(ctx, victim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		var conditions []corev1.NamespaceCondition
		if ns, err := stack.Kube.CoreV1().Namespaces().Get(ctx, victim, metav1.GetOptions{}); err == nil {
			conditions = ns.Status.Conditions
		}
		t.Fatalf("namespace %s not deleted %s after an install whose server never became ready: %v; its conditions: %v",
			victim, time.Since(start).Round(time.Second), err, conditions)
	}
	t.Logf("namespace deleted in %s after an install whose server never became ready", time.Since(start).Round(100*time.Millisecond))
}
