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

// TestNamespaceDeletionWaitsForTheServer measures what the README's
// operations section says: while the server is down, every namespace
// deletion in the cluster waits (the namespace controller can't discover
// our group, so it can't know whether the namespace holds objects of ours),
// and says so in a NamespaceDeletionDiscoveryFailure condition; once the
// server is back, the deletion completes, our objects in the namespace
// included.
func TestNamespaceDeletionWaitsForTheServer(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	outage := outageLength(t)
	const ns = "outage"
	createNamespace(t, ns)
	admin, err := clientset.NewForConfig(stack.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	rev := &v1alpha1.ControllerRevision{
		ObjectMeta:  metav1.ObjectMeta{Name: "left-in-the-namespace"},
		ParentPatch: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
	}
	if _, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Create(ctx, rev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := stack.StopComposite(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = stack.StartComposite(ctx)
		}
	})
	if err := stack.WaitAPIServiceAvailable(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := stack.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var condition string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, outage, true, func(ctx context.Context) (bool, error) {
		got, err := stack.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NamespaceDeletionDiscoveryFailure && c.Status == corev1.ConditionTrue {
				condition = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the namespace controller never said why the deletion waits: %v", err)
	}
	if !strings.Contains(condition, "metacontroller.k8s.io/v1alpha1") {
		t.Errorf("NamespaceDeletionDiscoveryFailure does not name our group: %q", condition)
	}
	saidAfter := time.Since(deleted)
	time.Sleep(time.Until(down.Add(outage)))
	got, err := stack.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("after a %s outage the namespace is %v (%v); want it Terminating, waiting for the server", outage, got.Status.Phase, err)
	}

	restarted = true
	if err := stack.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*outage+2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stack.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the namespace was not deleted after the server came back: %v", err)
	}
	goneAfter := time.Since(back)
	revs, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(revs.Items) != 0 {
		t.Errorf("ControllerRevisions left in the deleted namespace: %v, %v", revs, err)
	}
	// The figures the README's operations section quotes.
	t.Logf("outage of %s: the namespace controller said %s after the deletion why it waits (%q); the namespace was gone %s after the server was back",
		outage.Round(time.Second), saidAfter.Round(100*time.Millisecond), condition, goneAfter.Round(100*time.Millisecond))
}
