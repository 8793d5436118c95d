package loop

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestSyncWithoutDryRunAppliesThePlanNow syncs a parent the loop does not
// handle (its label does not match the controller's parent selector), so
// that whatever happens is the /sync request's doing.
func TestSyncWithoutDryRunAppliesThePlanNow(t *testing.T) {
	hook := setUp(t)
	ns := namespace(t, "loop-syncnow")
	controller{Name: "loop-syncnow", HookURL: hook.URL}.create(t)
	parent := createParent(t, ns, "p", "someone-else", spec("blue", "a", "b"))

	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"p"}}}`, ns)
	file := filepath.Join(t.TempDir(), "sync.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := stack.Kubectl(context.Background(), "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/loop-syncnow/sync", "-f", file)
	if err != nil {
		t.Fatalf("sync: %v: %s", err, stderr)
	}
	var answer struct {
		Status struct {
			DryRun bool `json:"dryRun"`
			Plan   []struct{ Action, Name, Error string }
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Status.DryRun || len(answer.Status.Plan) != 2 {
		t.Fatalf("answer %+v, want a plan of two creates, not a dry run", answer.Status)
	}
	for _, item := range answer.Status.Plan {
		if item.Action != "Create" || item.Error != "" {
			t.Errorf("plan item %+v, want a Create without error", item)
		}
	}
	// Done when the answer came: no waiting.
	cms := configMaps(t, ns)
	if names(cms) != "p-a,p-b" {
		t.Fatalf("after the sync the namespace holds %q, want p-a,p-b", names(cms))
	}
	for _, cm := range cms {
		if !ownedBy(&cm, parent) {
			t.Errorf("%s is not owned by p", cm.Name)
		}
	}
	if got := getParent(t, ns, "p"); got.Object["status"] == nil {
		t.Errorf("the parent's status was not written")
	}
}

// TestMetricsCountSyncsHookCallsAndQueues reads composite-apiserver's
// /metrics as kube-apiserver's aggregator would reach it.
func TestMetricsCountSyncsHookCallsAndQueues(t *testing.T) {
	hook := setUp(t)
	ns := namespace(t, "loop-metrics")
	controller{Name: "loop-metrics", HookURL: hook.URL}.create(t)
	createParent(t, ns, "p", "loop-metrics", spec("blue", "a"))
	waitConfigMaps(t, ns, "p-a")

	cert, err := stack.Certs.Issue(stack.Certs.FrontProxyCA, framework.FrontProxyClientName, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	client, err := stack.CompositeHTTPClient(&cert)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, stack.CompositeURL()+"/metrics", nil)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, data)
	}
	for _, want := range []string{
		`composite_controller_syncs_total{controller="loop-metrics",result="success"}`,
		`composite_controller_sync_duration_seconds_count{controller="loop-metrics"}`,
		`composite_hook_requests_total{code="200",controller="loop-metrics",hook="sync"}`,
		`workqueue_depth{name="compositecontroller-loop-metrics"}`,
		`workqueue_work_duration_seconds_count{name="compositecontroller-loop-metrics"}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
