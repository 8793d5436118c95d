package install

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestAFailedInstallLeavesNamespaceDeletionWorking installs the chart as
// docs/install.md's "Steps" say, but the server never becomes ready (no
// kubelet runs its pods here, as an image that can't be pulled or an etcd
// that can't be reached would leave them): namespaces anywhere in the
// cluster are still deleted. An APIService registered with nobody behind it
// would make kube-controller-manager's namespace controller wait on our
// group's discovery (NamespaceDeletionDiscoveryFailure) for as long as the
// install stays broken: the server registers the APIService only once a
// replica is ready (--register-apiservice), and none is.
func TestAFailedInstallLeavesNamespaceDeletionWorking(t *testing.T) {
	suite.DumpLogsOnFailure(t)
	ctx := context.Background()
	// The stack's own registration goes for the install's, and comes back
	// at the end.
	suite.Disrupted()
	apiServices := suite.Aggregator.ApiregistrationV1().APIServices()
	if err := apiServices.Delete(ctx, framework.APIServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const release, namespace = "failsafe", "failsafe-system"
	chart := chartDir(t)
	t.Cleanup(func() {
		if out, err := uninstall(release, namespace); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
		if err := suite.RegisterAPIService(ctx); err != nil {
			t.Fatalf("can't register the stack's APIService again: %v", err)
		}
		suite.Recovered()
	})
	// Its own names: the stack's server identity holds the chart's default
	// ones.
	mustHelm(t, "install", release, chart, "--namespace", namespace, "--create-namespace",
		"--set", "image.repository=registry.invalid/composite-apiserver", "--set", "image.tag=never-pulled",
		"--set", "fullnameOverride=failsafe-apiserver")

	// Generous: an empty namespace goes in about a second.
	took, err := suite.TimeNamespaceDeletion(ctx, "failsafe-victim", 2*time.Minute)
	if err != nil {
		t.Fatalf("after an install whose server never became ready: %v", err)
	}
	t.Logf("namespace deleted in %s after an install whose server never became ready", took.Round(100*time.Millisecond))
}
