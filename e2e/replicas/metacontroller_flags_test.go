package replicas

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func plainGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetacontrollersOperationalFlags: a server run with Metacontroller's
// --target-label-selector, --metrics-address and
// --health-probe-bind-address runs the loop for the selected controllers
// only, serves Metacontroller's metric names over plain HTTP, and answers
// probes over plain HTTP.
func TestMetacontrollersOperationalFlags(t *testing.T) {
	// Sequential: restarts the server (restartWith), which then runs only the controllers of one label.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	metrics, probes := freeAddress(t), freeAddress(t)
	suite.RestartWith(t, "--target-label-selector=controller-group=mc-flags",
		"--metrics-address="+metrics, "--health-probe-bind-address="+probes)
	ns := suite.Namespace(t, "mc-flags")
	selected := framework.HelloController{Name: "mc-flags-selected", HookURL: hook.URL}
	other := framework.HelloController{Name: "mc-flags-other", HookURL: hook.URL}
	labelled := strings.Replace(selected.Manifest(), "  name: mc-flags-selected\n", "  name: mc-flags-selected\n  labels: {controller-group: mc-flags}\n", 1)
	for _, m := range []string{labelled, other.Manifest()} {
		suite.MustApply(t, m)
	}
	t.Cleanup(func() {
		for _, name := range []string{selected.Name, other.Name} {
			_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	suite.WaitRunning(t, selected.Name)
	suite.CreateHello(t, ns, "other", other.Name, framework.HelloSpec("blue", "a"))
	suite.CreateHello(t, ns, "selected", selected.Name, framework.HelloSpec("blue", "a"))
	suite.WaitObserved(t, ns, "selected", 1)

	// The loop never ran the other controller: no status, and no hook
	// call for its parent, created before the selected one converged.
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || got.Status.ObservedGeneration != 0 {
		t.Errorf("the controller outside --target-label-selector has a status: %+v", got.Status)
	}
	calls, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	if n := calls["/sync "+ns+"/other"]; n != 0 {
		t.Errorf("the parent of the controller outside --target-label-selector was synced %d times", n)
	}

	code, body := plainGet(t, "http://"+metrics+"/metrics")
	want := fmt.Sprintf(`metacontroller_sync_requests_total{code="200",controller_name="%s",controller_type="CompositeController",method="post",url="%s/sync"}`, selected.Name, hook.URL)
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("plain /metrics: %d, no %s in:\n%s", code, want, grepLines(body, "metacontroller_sync_requests_total"))
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body := plainGet(t, "http://"+probes+path); code != http.StatusOK || body != "ok" {
			t.Errorf("plain %s: %d %q", path, code, body)
		}
	}
}

func grepLines(text, substring string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substring) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestMetacontrollersFlagNamesInTheBinary: the built binary, run as users
// run it (its main goes through component-base's cli.Run, which installs a
// flag normalization of its own), takes Metacontroller's names of our
// flags. A replica started with --leader-election, --leader-election-id
// and --leader-election-namespace (and the client and cache flags) leads
// under the Lease those name.
func TestMetacontrollersFlagNamesInTheBinary(t *testing.T) {
	// Sequential: starts a replica whose loop runs beside the server's.
	ctx := context.Background()
	const lease = "e2e-metacontroller-flag-names"
	r, err := suite.StartReplica(ctx, "replica-mc-flag-names",
		"--leader-election", "--leader-election-id="+lease, "--leader-election-namespace="+framework.CompositeNamespace,
		"--client-go-qps=50", "--client-go-burst=100", "--cache-flush-interval=10m")
	if err != nil {
		t.Fatalf("the binary refused Metacontroller's flags: %v", err)
	}
	defer r.Stop(30 * time.Second)
	suite.Eventually(t, "the replica holding the Lease --leader-election-id names", func() (bool, error) {
		_, p, err := leaseHolder(ctx, framework.CompositeNamespace, lease, r)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return p == r, err
	})
}
