package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestSyncWithoutDryRunRefusesAParentTheControllerDoesNotSync: a live
// /sync does what a loop sync does, and the loop leaves a parent outside the
// controller's label selector alone; /sync says so and changes nothing.
// e2e/cluster proves what a live /sync does, with the loop off.
func TestSyncWithoutDryRunRefusesAParentTheControllerDoesNotSync(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-syncnow")
	framework.HelloController{Name: "loop-syncnow", HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", "someone-else", framework.HelloSpec("blue", "a", "b"))

	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"p"}}}`, ns)
	file := filepath.Join(t.TempDir(), "sync.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := suite.Kubectl(context.Background(), "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/loop-syncnow/sync", "-f", file)
	if err == nil || !strings.Contains(stderr, `does not sync Hello p: the parent does not match spec.parentResource.labelSelector`) {
		t.Fatalf("sync: err %v, stderr %s; want it refused, naming the label selector", err, stderr)
	}
	if cms := suite.ConfigMaps(t, ns); len(cms) != 0 {
		t.Errorf("a refused sync created %q", framework.Names(cms))
	}
	if got := suite.GetHello(t, ns, "p"); got.Object["status"] != nil {
		t.Errorf("a refused sync wrote the parent's status: %v", got.Object["status"])
	}
}

// TestMetricsCountSyncsHookCallsAndQueues reads composite-apiserver's
// /metrics as kube-apiserver's aggregator would reach it.
func TestMetricsCountSyncsHookCallsAndQueues(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-metrics")
	framework.HelloController{Name: "loop-metrics", HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", "loop-metrics", framework.HelloSpec("blue", "a"))
	suite.WaitConfigMaps(t, ns, "p-a")

	data := suite.CompositeGet(t, "/metrics")
	for _, want := range []string{
		`composite_controller_syncs_total{controller="loop-metrics",result="success"}`,
		`composite_controller_sync_duration_seconds_count{controller="loop-metrics"}`,
		`composite_hook_requests_total{code="200",controller="loop-metrics",hook="sync"}`,
		`workqueue_depth{name="compositecontroller-loop-metrics"}`,
		`workqueue_work_duration_seconds_count{name="compositecontroller-loop-metrics"}`,
	} {
		if !strings.Contains(data, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
