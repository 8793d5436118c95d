package gke

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestCriticalPodsQuotaLetsGKEAdmitThePods installs the chart for real
// (its namespaced objects, framework.InstallNamespaced) on a kube-apiserver
// that limits critical-priority Pods as GKE's does: with the default
// values the ReplicaSet and the StatefulSet cannot create a single Pod
// ("insufficient quota to match these scopes", what an admin on GKE
// meets), and with criticalPodsQuota.enabled every Pod is admitted.
func TestCriticalPodsQuotaLetsGKEAdmitThePods(t *testing.T) {
	suite.DumpLogsOnFailure(t)
	ctx := context.Background()

	without := namespace(t, "gke-without-quota")
	install(t, without)
	var events string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		events = suite.NamespaceEvents(ctx, without)
		return strings.Count(events, "insufficient quota to match these scopes") > 0 &&
			strings.Contains(events, "ReplicaSet/") && strings.Contains(events, "StatefulSet/"), nil
	})
	if err != nil {
		t.Errorf("without the quota, no FailedCreate of insufficient quota from both the ReplicaSet and the StatefulSet: %v\nEvents:\n%s", err, events)
	}
	if pods, err := suite.Kube.CoreV1().Pods(without).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("without the quota, Pods were admitted (%v): the stack does not limit critical Pods as GKE does", err)
	}

	with := namespace(t, "gke-with-quota")
	in := install(t, with, "criticalPodsQuota.enabled=true")
	if _, err := suite.WaitPods(ctx, with, in.Pods); err != nil {
		t.Error(err)
	}
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := suite.CreateNamespace(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}) })
	if err := suite.EnsureDefaultServiceAccount(ctx, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func install(t *testing.T, ns string, set ...string) *framework.Install {
	t.Helper()
	rendered, err := framework.RenderChart(ns, "", set...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := suite.InstallNamespaced(context.Background(), rendered, ns, ns)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
