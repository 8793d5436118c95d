package rollout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// panicAnnotation makes the server built with framework.InjectTag panic in
// each sync of the parent it is on.
const panicAnnotation = "e2e.composite.metacontroller.k8s.io/panic"

// TestPanicInOneControllerLeavesTheServerAndTheOthersRunning runs the
// server built with framework.InjectTag and two controllers, and makes
// every sync of one parent of the first panic. The server serves on: the
// first controller reports the panic (Ready=False, reason Panicked, an
// Event, composite_controller_panics_total), the second syncs its new and
// changed parents meanwhile, and once the parent's annotation is gone the
// first syncs it and its other parents again.
func TestPanicInOneControllerLeavesTheServerAndTheOthersRunning(t *testing.T) {
	// Sequential: runs and restarts the server with another binary (UseCompositeBinary).
	suite.SetUpHellos(t)
	ctx := context.Background()
	const a, b = "rollout-panic-a", "rollout-panic-b"
	// Deleted last, by the shipped server the test ends with.
	t.Cleanup(func() {
		for _, name := range []string{a, b} {
			_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	injecting, err := framework.BuildInjectingCompositeAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	shipped := suite.UseCompositeBinary(injecting)
	t.Cleanup(func() {
		suite.UseCompositeBinary(shipped)
		if err := suite.Restart(); err != nil {
			t.Errorf("can't start the shipped server again: %v", err)
		}
	})
	if err := suite.Restart(); err != nil {
		t.Fatal(err)
	}
	exits := len(suite.UnexpectedExits())

	hook := startRevisionHook(t)
	for _, name := range []string{a, b} {
		suite.MustCreateNamespace(t, name)
		suite.MustApply(t, plainController(name, hook.url))
		for _, p := range []string{"p-0", "p-1"} {
			suite.CreateHello(t, name, p, name, map[string]interface{}{"greeting": "hello"})
		}
	}
	v1 := func(string) string { return "v1" }
	waitRevisions(t, a, []string{"p-0", "p-1"}, v1, 2*time.Minute)
	waitRevisions(t, b, []string{"p-0", "p-1"}, v1, 2*time.Minute)
	panics, err := panicsOf(a)
	if err != nil {
		t.Fatal(err)
	}
	serving := proveServing(t)

	since := time.Now()
	annotate(t, a, "p-0", panicAnnotation+"=true")
	controllerEvent(t, a, "Panicked", "", since)
	suite.Within(t, a+"'s status Ready=False with reason Panicked", time.Minute, func() (bool, error) {
		c, err := readyOf(a)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Panicked", err
	})
	suite.Within(t, "composite_controller_panics_total counting "+a+"'s panic", time.Minute, func() (bool, error) {
		n, err := panicsOf(a)
		return n > panics, err
	})

	// The other controller syncs a new parent and a changed one while the
	// first one's parent is still annotated.
	changedCalls := sum(hook.callsOf(b + "/p-1"))
	suite.CreateHello(t, b, "p-2", b, map[string]interface{}{"greeting": "hello"})
	if _, stderr, err := suite.Kubectl(ctx, "-n", b, "patch", "hellos.example.com", "p-1", "--type=merge", "-p", `{"spec":{"greeting":"changed"}}`); err != nil {
		t.Fatalf("kubectl patch: %v: %s", err, stderr)
	}
	waitRevisions(t, b, []string{"p-2"}, v1, time.Minute)
	suite.Within(t, b+"'s changed parent synced while "+a+" panics", time.Minute, func() (bool, error) {
		return sum(hook.callsOf(b+"/p-1")) > changedCalls && observedGeneration(t, b, "p-1") == 2, nil
	})

	// Without the annotation the first controller syncs the parent again,
	// and a new one.
	calls := sum(hook.callsOf(a + "/p-0"))
	annotate(t, a, "p-0", panicAnnotation+"-")
	suite.CreateHello(t, a, "p-2", a, map[string]interface{}{"greeting": "hello"})
	waitRevisions(t, a, []string{"p-0", "p-2"}, v1, 2*time.Minute)
	suite.Within(t, a+" converged again: p-0 synced, Ready=True", 2*time.Minute, func() (bool, error) {
		c, err := readyOf(a)
		return sum(hook.callsOf(a+"/p-0")) > calls && c != nil && c.Status == metav1.ConditionTrue, err
	})

	if failures := serving(); len(failures) > 0 {
		t.Errorf("the aggregated API failed %d requests while %s panicked; first: %s", len(failures), a, failures[0])
	}
	for _, e := range suite.UnexpectedExits()[exits:] {
		t.Errorf("a stack process ended while %s panicked: %s", a, e)
	}
}

// plainController is a CompositeController of the hellos labelled
// test=<name>, whose sync hook is revision v1's of hook.
func plainController(name, hookURL string) string { return plainControllerOf(name, hookURL, "v1") }

// annotate runs kubectl annotate of annotation on the hello ns/name.
func annotate(t *testing.T, ns, name, annotation string) {
	t.Helper()
	if _, stderr, err := suite.Kubectl(context.Background(), "-n", ns, "annotate", "hellos.example.com", name, annotation); err != nil {
		t.Fatalf("kubectl annotate %s: %v: %s", annotation, err, stderr)
	}
}

// readyOf is the Ready condition of the CompositeController name; nil when
// it has none.
func readyOf(name string) (*metav1.Condition, error) {
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("can't get the controller %s: %w", name, err)
	}
	return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady), nil
}

// proveServing lists the CompositeControllers through kube-apiserver, as a
// user does, every quarter second until the returned function is called
// (or t ends); that function returns the requests that failed.
func proveServing(t *testing.T) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var mu sync.Mutex
	var failures []string
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			_, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				failures = append(failures, time.Now().Format(time.StampMilli)+": "+err.Error())
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	stop := func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return failures
	}
	t.Cleanup(func() { stop() })
	return stop
}

// panicsOf sums composite_controller_panics_total of the CompositeController
// name, read from the server's /metrics as kube-apiserver's aggregator
// reaches it (its front-proxy client certificate: issuing another would
// rewrite the files kube-apiserver reads); absent series count 0.
func panicsOf(name string) (float64, error) {
	const metric = "composite_controller_panics_total"
	cert := suite.Certs.FrontProxyClient
	client, err := suite.CompositeHTTPClient(&cert)
	if err != nil {
		return 0, err
	}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, suite.CompositeURL()+"/metrics", nil)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("can't read /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("can't read /metrics: %d %s", resp.StatusCode, data)
	}
	var total float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// The controller label is the name, or kind/name.
		if !strings.HasPrefix(line, metric+"{") || !(strings.Contains(line, `"`+name+`"`) || strings.Contains(line, `/`+name+`"`)) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("can't read %q of /metrics: %w", line, err)
		}
		total += v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("can't read /metrics: %w", err)
	}
	return total, nil
}
