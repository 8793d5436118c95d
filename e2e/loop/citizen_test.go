package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's own controllers (kube-controller-manager's namespace,
// garbage-collector and quota controllers) work with our resources as with
// any other: they reach them with the metadata client, protobuf first.

// revisionCount is what the quota controller counts ControllerRevisions of
// our group as.
const revisionCount = corev1.ResourceName("count/controllerrevisions.metacontroller.k8s.io")

// TestNamespaceOfARollingParentIsCountedAndDeleted: a namespace holding a
// rolling parent, its children and its ControllerRevisions is counted by
// the resource-quota controller and deleted by the namespace framework.HelloController,
// with `kubectl delete ns --wait`, in its normal time.
func TestNamespaceOfARollingParentIsCountedAndDeleted(t *testing.T) {
	t.Parallel()
	hook := widgetHook(t)
	ctx := context.Background()
	const ctrl = "citizen-ns"
	ns := suite.Namespace(t, "citizen-ns")
	rollingController(t, ctrl, hook.URL, "RollingInPlace")
	parent := startRollout(t, ns, "p", ctrl, []string{"a", "b"})
	revisions := revisionsOf(t, ns, parent)

	// The quota controller counts our ControllerRevisions as it counts any
	// resource's objects.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "revisions", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{revisionCount: resource.MustParse("100")}},
	}
	if _, err := suite.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "the quota controller to count the ControllerRevisions", func() (bool, error) {
		q, err := suite.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used, ok := q.Status.Used[revisionCount]
		return unless(ok && used.Value() == int64(len(revisions)), fmt.Errorf("used %v, want %d", q.Status.Used, len(revisions)))
	})

	// kubectl events --for resolves our kind through discovery, as a user
	// asks what happened to a controller; the Events of a cluster-scoped
	// object are in the default namespace.
	suite.Eventually(t, "kubectl events --for compositecontroller/"+ctrl, func() (bool, error) {
		out, stderr, err := suite.Kubectl(ctx, "events", "--for", "compositecontroller/"+ctrl, "-n", "default")
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, stderr)
		}
		return unless(strings.Contains(out, "Started controller: "+ctrl), fmt.Errorf("no Started Event in:\n%s", out))
	})

	start := time.Now()
	if out, stderr, err := suite.Kubectl(ctx, "delete", "namespace", ns, "--wait", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl delete namespace %s --wait: %v\n%s%s\n%s", ns, err, out, stderr, namespaceConditions(t, ns))
	}
	t.Logf("namespace %s with a rolling parent, %d ControllerRevisions and its children deleted in %s", ns, len(revisions), time.Since(start).Round(time.Millisecond))
	if _, err := suite.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s still there after kubectl delete --wait: %v\n%s", ns, err, namespaceConditions(t, ns))
	}
}

// namespaceConditions is what the namespace controller says of a namespace
// it has not finished deleting.
func namespaceConditions(t *testing.T, ns string) string {
	t.Helper()
	got, err := suite.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range got.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// TestGarbageCollectorDeletesRevisionsOfADeletedParent: once its
// controller is gone (so the loop tracks the parent no more), deleting a
// rolling parent with --cascade=background or --cascade=foreground removes
// its ControllerRevisions and children: kube-controller-manager's garbage
// collector deletes them, in either propagation.
func TestGarbageCollectorDeletesRevisionsOfADeletedParent(t *testing.T) {
	t.Parallel()
	hook := widgetHook(t)
	ctx := context.Background()
	for _, cascade := range []string{"background", "foreground"} {
		t.Run(cascade, func(t *testing.T) {
			ctrl := "citizen-gc-" + cascade
			ns := suite.Namespace(t, ctrl)
			rollingController(t, ctrl, hook.URL, "RollingInPlace")
			parent := startRollout(t, ns, "p", ctrl, []string{"a", "b"})
			if len(revisionsOf(t, ns, parent)) == 0 {
				t.Fatal("the parent has no ControllerRevision")
			}
			if err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(ctx, ctrl, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			suite.Eventually(t, "CompositeController "+ctrl+" gone", func() (bool, error) {
				_, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if out, stderr, err := suite.Kubectl(ctx, "delete", "hellos.example.com", parent.GetName(), "-n", ns,
				"--cascade="+cascade, "--wait", "--timeout=60s"); err != nil {
				t.Fatalf("kubectl delete --cascade=%s: %v\n%s%s", cascade, err, out, stderr)
			}
			suite.Eventually(t, "the garbage collector to delete the parent's ControllerRevisions and Widgets", func() (bool, error) {
				revs := revisionsOf(t, ns, parent)
				ws, err := suite.Dynamic.Resource(widgets).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				return unless(len(revs) == 0 && len(ws.Items) == 0,
					fmt.Errorf("revisions %v and %d Widgets left", revs, len(ws.Items)))
			})
			if cascade == "foreground" {
				// In foreground the parent itself waits for its
				// dependents, our revisions among them, and is gone
				// once they are (kubectl --wait saw it go).
				if _, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, parent.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("parent still there after a foreground delete: %v", err)
				}
			}
		})
	}
}
