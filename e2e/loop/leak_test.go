package loop

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// leakControllers is how many controllers TestControllersLeaveNothingBehind
// creates and deletes, each on a resource of its own: 200 with
// COMPOSITE_E2E_LONG=1.
func leakControllers() int {
	if os.Getenv("COMPOSITE_E2E_LONG") != "" {
		return 200
	}
	return 20
}

// serverFigures are composite-apiserver's informers (one watch each),
// goroutines and heap in use, after a garbage collection.
func serverFigures(t *testing.T) (informers, goroutines, heap float64) {
	t.Helper()
	compositeGet(t, "/debug/pprof/heap?gc=1")
	metrics := compositeMetrics(t)
	return metricValue(t, metrics, "composite_controller_informers"), ownGoroutines(t), metricValue(t, metrics, "go_memstats_heap_inuse_bytes")
}

// ownGoroutines counts the server's goroutines but those serving its
// clients' connections (two per HTTP/2 connection, kept open by the
// clients until the server's 90 s idle timeout): how many there are says
// how busy kube-apiserver's proxy was, not what the loop keeps.
func ownGoroutines(t *testing.T) float64 {
	t.Helper()
	profile := compositeGet(t, "/debug/pprof/goroutine?debug=1")
	total := 0
	for _, block := range strings.Split(profile, "\n\n") {
		var n int
		if _, err := fmt.Sscanf(block, "%d @", &n); err != nil {
			continue
		}
		if strings.Contains(block, "http2.(*serverConn)") || strings.Contains(block, "net/http.(*conn).serve") {
			continue
		}
		total += n
	}
	return float64(total)
}

func metricValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// watchesOf is how many watches kube-apiserver serves on each resource of
// group.
func watchesOf(t *testing.T, group string) map[string]int {
	t.Helper()
	data, err := stack.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^apiserver_longrunning_requests\{.*group="` + regexp.QuoteMeta(group) + `",resource="([^"]+)".*verb="WATCH"[^}]*\} (\d+)$`)
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			out[m[1]] += n
		}
	}
	return out
}

// TestControllersLeaveNothingBehind creates controllers on resources of
// their own, waits for them to run, and deletes them: their informers stop
// (kube-apiserver serves no more watches on those resources) and the
// server's goroutines and heap come back to within 10% of where they were.
func TestControllersLeaveNothingBehind(t *testing.T) {
	hook := setUp(t)
	ctx := context.Background()
	n := leakControllers()
	const group = "leak.example.com"
	var crds strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&crds, "%s---\n", crdYAML(group, fmt.Sprintf("leak%ds", i), fmt.Sprintf("Leak%d", i), true))
	}
	crds.WriteString(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: composite-apiserver-leak
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
- apiGroups: ["leak.example.com"]
  resources: ["*"]
  verbs: ["get", "list", "watch", "update", "patch"]
`)
	beforeInformers, beforeGoroutines, beforeHeap := serverFigures(t)
	if err := stack.Apply(ctx, crds.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("COMPOSITE_E2E_GOROUTINES") != "" {
			t.Logf("goroutines:\n%s", compositeGet(t, "/debug/pprof/goroutine?debug=1"))
		}
		args := []string{"delete", "crd", "--wait=false", "--ignore-not-found"}
		for i := 0; i < n; i++ {
			args = append(args, fmt.Sprintf("leak%ds.%s", i, group))
		}
		_, _, _ = stack.Kubectl(context.Background(), args...)
	})
	for i := 0; i < n; i++ {
		if _, stderr, err := stack.Kubectl(ctx, "wait", "--for=condition=Established", fmt.Sprintf("crd/leak%ds.%s", i, group), "--timeout=60s"); err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
	}
	names := make([]string, n)
	var controllers strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("leak-%d", i)
		fmt.Fprintf(&controllers, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource: {apiVersion: %s/v1, resource: leak%ds}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  hooks:
    sync:
      webhook: {url: "%s/sync"}
---
`, names[i], group, i, hook.URL)
	}
	if err := stack.Apply(ctx, controllers.String()); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		waitRunning(t, name)
	}
	// kube-apiserver serves a watch of each controller's parents to the
	// server (and some to kube-controller-manager's garbage collector and
	// quota controller).
	var running map[string]int
	eventually(t, "a watch on every controller's parents", func() (bool, error) {
		running = watchesOf(t, group)
		informers, _, _ := serverFigures(t)
		return unless(len(running) == n && informers >= beforeInformers+float64(n),
			fmt.Errorf("watches %v, server informers %.0f (before %.0f)", running, informers, beforeInformers))
	})
	for _, name := range names {
		if err := cc.MetacontrollerV1alpha1().CompositeControllers().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	eventually(t, "the server's watch of every deleted controller's parents to end", func() (bool, error) {
		w := watchesOf(t, group)
		for resource, count := range running {
			if w[resource] != count-1 {
				return false, fmt.Errorf("%d watches of %s, %d while the controller ran", w[resource], resource, count)
			}
		}
		return true, nil
	})
	// The resources go too, so that what the server learned of them
	// (discovery, OpenAPI schemas) is not counted against the loop.
	args := []string{"delete", "crd", "--wait=true", "--timeout=60s"}
	for i := 0; i < n; i++ {
		args = append(args, fmt.Sprintf("leak%ds.%s", i, group))
	}
	if _, stderr, err := stack.Kubectl(ctx, args...); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	// Clients' idle connections to the server (kube-apiserver opened more
	// to proxy the burst) hold goroutines and buffers until the server's
	// idle timeout (90 s) closes them: what they hold is not the loop's.
	var informers, goroutines, heap float64
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		informers, goroutines, heap = serverFigures(t)
		last = fmt.Errorf("informers %.0f (before %.0f), goroutines %.0f (before %.0f), heap %.1f MiB (before %.1f MiB)",
			informers, beforeInformers, goroutines, beforeGoroutines, heap/(1<<20), beforeHeap/(1<<20))
		return informers <= beforeInformers && goroutines <= 1.1*beforeGoroutines && heap <= 1.1*beforeHeap, nil
	})
	if err != nil {
		t.Fatalf("informers, goroutines and heap not back to within 10%% of where they were: %v", last)
	}
	t.Logf("%d controllers created and deleted: informers %.0f -> %.0f, goroutines %.0f -> %.0f, heap in use %.1f -> %.1f MiB",
		n, beforeInformers, informers, beforeGoroutines, goroutines, beforeHeap/(1<<20), heap/(1<<20))
}
