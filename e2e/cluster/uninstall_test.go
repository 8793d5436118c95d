package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestUninstallInOrderLeavesNamespaceDeletionWorking follows the
// uninstall of artifacts/deploy/README.md: the APIService goes first, then
// the server. Namespaces, one holding an object of ours among them, are
// then deleted as usual: the namespace controller no longer asks our
// group. (The other order, the server stopped under a registered APIService,
// blocks every namespace deletion until it is back:
// TestNamespaceDeletionWaitsForTheServer.) The server is installed back
// afterwards for the package's other tests.
func TestUninstallInOrderLeavesNamespaceDeletionWorking(t *testing.T) {
	// Sequential: it deletes the APIService and stops composite-apiserver, which every other test goes through.
	suite.SetUp(t)
	ctx := context.Background()
	const ns = "uninstall"
	admin, rev := revisionIn(t, ns, "left-in-the-namespace")

	// 1. The APIService: kube-apiserver stops proxying and advertising
	//    the group.
	mustKubectl(t, "delete", "apiservice", framework.APIServiceName)
	reinstalled := false
	t.Cleanup(func() {
		if reinstalled {
			return
		}
		if err := suite.StartComposite(ctx); err != nil {
			t.Error(err)
		}
		if err := suite.RegisterAPIService(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := waitAdvertised(ctx, false); err != nil {
		t.Fatalf("kube-apiserver still advertises %s after the APIService was deleted: %v", v1alpha1.GroupName, err)
	}
	// 2. The server.
	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}

	// Namespace deletion works: the one that held our object, and any other.
	start := time.Now()
	for _, name := range []string{ns, "uninstall-other"} {
		if name != ns {
			suite.MustCreateNamespace(t, name)
		}
		if err := suite.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{ns, "uninstall-other"} {
			got, err := suite.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err
			}
			last = name + ": " + string(got.Status.Phase)
			for _, c := range got.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					last += "; " + string(c.Type) + ": " + c.Message
				}
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("namespaces not deleted within 60s of an uninstall in order (last: %s): %v", last, err)
	}
	if strings.Contains(last, string(corev1.NamespaceDeletionDiscoveryFailure)) {
		t.Errorf("the namespace controller waited on our group after the APIService was gone: %s", last)
	}
	t.Logf("after the uninstall, two namespaces were deleted in %s", time.Since(start).Round(100*time.Millisecond))

	// Installed back: the object of ours left in etcd is still there (the
	// namespace controller never saw it), as the README says.
	reinstalled = true
	if err := suite.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	if err := suite.RegisterAPIService(ctx); err != nil {
		t.Fatal(err)
	}
	// The parallel tests start when this one ends: they find the group
	// advertised again, not only the APIService available.
	if err := waitAdvertised(ctx, true); err != nil {
		t.Fatalf("kube-apiserver does not advertise %s again after the reinstall: %v", v1alpha1.GroupName, err)
	}
	if _, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Get(ctx, rev.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the ControllerRevision left behind in the server's etcd: %v", err)
	} else {
		_ = admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Delete(ctx, rev.Name, metav1.DeleteOptions{})
	}
}

// waitAdvertised waits up to 30 s until kube-apiserver's discovery
// advertises our group, or no longer does.
func waitAdvertised(ctx context.Context, want bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		groups, err := suite.Kube.Discovery().ServerGroups()
		if err != nil {
			return false, nil
		}
		for _, g := range groups.Groups {
			if g.Name == v1alpha1.GroupName {
				return want, nil
			}
		}
		return !want, nil
	})
}
