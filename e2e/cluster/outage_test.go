package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// outageLength is how long TestNamespaceDeletionWaitsForTheServer keeps
// the server down; COMPOSITE_E2E_OUTAGE (a Go duration) measures another.
func outageLength(t *testing.T) time.Duration {
	if v := os.Getenv("COMPOSITE_E2E_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("COMPOSITE_E2E_OUTAGE: %v", err)
		}
		return d
	}
	return 20 * time.Second
}

// TestNamespaceDeletionWaitsForTheServer measures what docs/operations.md's
// "A good citizen of the cluster" says: while the server is down, every namespace
// deletion in the cluster waits (the namespace controller can't discover
// our group, so it can't know whether the namespace holds objects of ours),
// and says so in a NamespaceDeletionDiscoveryFailure condition; once the
// server is back, the deletion completes, our objects in the namespace
// included.
func TestNamespaceDeletionWaitsForTheServer(t *testing.T) {
	// Sequential: it stops composite-apiserver, which blocks every namespace deletion and request of ours in the cluster.
	suite.SetUp(t)
	ctx := context.Background()
	outage := outageLength(t)
	const ns = "outage"
	admin, _ := revisionIn(t, ns, "left-in-the-namespace")

	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = suite.StartComposite(ctx)
		}
	})
	if err := suite.WaitAPIServiceAvailable(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := suite.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	condition := waitDiscoveryFailure(t, ns)
	if !strings.Contains(condition, "metacontroller.k8s.io/v1alpha1") {
		t.Errorf("NamespaceDeletionDiscoveryFailure does not name our group: %q", condition)
	}
	saidAfter := time.Since(deleted)
	time.Sleep(time.Until(down.Add(outage)))
	got, err := suite.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("after a %s outage the namespace is %v (%v); want it Terminating, waiting for the server", outage, got.Status.Phase, err)
	}

	restarted = true
	if err := suite.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitNamespaceGone(t, ns, 2*outage+2*time.Minute)
	goneAfter := time.Since(back)
	revs, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(revs.Items) != 0 {
		t.Errorf("ControllerRevisions left in the deleted namespace: %v, %v", revs, err)
	}
	// The figures docs/operations.md quotes.
	t.Logf("outage of %s: the namespace controller said %s after the deletion why it waits (%q); the namespace was gone %s after the server was back",
		outage.Round(time.Second), saidAfter.Round(100*time.Millisecond), condition, goneAfter.Round(100*time.Millisecond))
}

// TestUnregisteringTheAPIServiceUnblocksNamespaceDeletion measures the way
// out docs/operations.md gives for a server that stays down:
// deleting the APIService lets namespace deletions proceed at once; once the
// APIService is registered again and the server is back, the garbage
// collector deletes our objects whose owners went with their namespace.
func TestUnregisteringTheAPIServiceUnblocksNamespaceDeletion(t *testing.T) {
	// Sequential: it stops composite-apiserver and unregisters the APIService every other test goes through.
	suite.SetUp(t)
	ctx := context.Background()
	const ns = "unregister"
	suite.MustCreateNamespace(t, ns)
	owner, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, rev := revisionIn(t, ns, "of-a-parent", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID})

	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	registered, running := true, false
	t.Cleanup(func() {
		if !running {
			_ = suite.StartComposite(ctx)
		}
		if !registered {
			_ = suite.RegisterAPIService(ctx)
		}
	})
	if err := suite.WaitAPIServiceAvailable(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := suite.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDiscoveryFailure(t, ns)

	if err := suite.Aggregator.ApiregistrationV1().APIServices().Delete(ctx, "v1alpha1.metacontroller.k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	registered = false
	unregistered := time.Now()
	waitNamespaceGone(t, ns, 2*time.Minute)
	goneAfter := time.Since(unregistered)

	// The server first, then the APIService: registered while nothing
	// answers, it would stall every namespace deletion again.
	if err := suite.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	running = true
	if err := suite.RegisterAPIService(ctx); err != nil {
		t.Fatal(err)
	}
	registered = true
	back := time.Now()
	// The namespace is gone but our etcd still holds its revision: the
	// namespace controller could not see our group while it deleted it.
	// Its owner is gone too, so the garbage collector deletes it once it
	// discovers our group again.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Get(ctx, rev.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the ControllerRevision of a parent deleted with its namespace is still there after the server came back: %v", err)
	}
	t.Logf("with the APIService deleted, the waiting namespace was gone after %s; once registered again, the garbage collector deleted our orphaned revision %s after the server was back",
		goneAfter.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
}

// waitDiscoveryFailure waits for the namespace controller to say that the
// deletion of ns waits for a group it can't discover, and returns what it
// says.
func waitDiscoveryFailure(t *testing.T, ns string) string {
	t.Helper()
	var message string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := suite.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NamespaceDeletionDiscoveryFailure && c.Status == corev1.ConditionTrue {
				message = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the namespace controller never said why the deletion of %s waits: %v", ns, err)
	}
	return message
}

func waitNamespaceGone(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := suite.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s was not deleted: %v", ns, err)
	}
}

// revisionIn creates a ControllerRevision named name in ns as the
// administrator, owned by owners, and returns the client it used: an
// object of ours in a namespace, for the tests of what happens to it when
// the namespace goes.
func revisionIn(t *testing.T, ns, name string, owners ...metav1.OwnerReference) (clientset.Interface, *v1alpha1.ControllerRevision) {
	t.Helper()
	suite.MustCreateNamespace(t, ns)
	admin, err := clientset.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	rev := &v1alpha1.ControllerRevision{
		ObjectMeta:  metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		ParentPatch: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
	}
	if _, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Create(context.Background(), rev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return admin, rev
}
