package loop

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
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
// goroutines and live heap: the bytes of the heap's objects right after a
// garbage collection (go_memstats_heap_alloc_bytes), what a leak grows.
// The heap's in-use spans (heap_inuse) also count the free room in
// partly used spans, which moved by 5-12% between two rounds of this
// test with nothing kept.
func serverFigures(t *testing.T) (informers, goroutines, heap float64) {
	t.Helper()
	suite.CompositeGet(t, "/debug/pprof/heap?gc=1")
	metrics := suite.CompositeGet(t, "/metrics")
	return metricValue(t, metrics, "composite_controller_informers"), ownGoroutines(t), metricValue(t, metrics, "go_memstats_heap_alloc_bytes")
}

// ownGoroutines counts the server's goroutines but those serving its
// clients' connections (two per HTTP/2 connection, kept open by the
// clients until the server's 90 s idle timeout): how many there are says
// how busy kube-apiserver's proxy was, not what the loop keeps.
func ownGoroutines(t *testing.T) float64 {
	t.Helper()
	profile := suite.CompositeGet(t, "/debug/pprof/goroutine?debug=1")
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
	data, err := suite.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
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
// their own, waits for them to run, and deletes them (and their resources):
// their informers stop (kube-apiserver serves no more watches on those
// resources, and the server counts no informer), and the server's
// goroutines and heap come back to within 10% of where they were. A first
// round warms up what any use of the server fills once (bounded caches:
// Event deduplication, the watch cache, connection pools); the second is
// measured against it, so that what grows with every controller shows.
func TestControllersLeaveNothingBehind(t *testing.T) {
	// Sequential: reads the server's goroutines, heap and informer count.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	n := leakControllers()
	leakRound(t, hook.URL, 0, n)
	beforeInformers, beforeGoroutines, beforeHeap := serverFigures(t)
	leakRound(t, hook.URL, 1, n)
	var informers, goroutines, heap float64
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		informers, goroutines, heap = serverFigures(t)
		last = fmt.Errorf("informers %.0f (before %.0f), goroutines %.0f (before %.0f), heap %.1f MiB (before %.1f MiB)",
			informers, beforeInformers, goroutines, beforeGoroutines, heap/(1<<20), beforeHeap/(1<<20))
		return informers <= beforeInformers && goroutines <= 1.1*beforeGoroutines && heap <= 1.1*beforeHeap, nil
	})
	if err != nil {
		t.Logf("goroutines:\n%s", suite.CompositeGet(t, "/debug/pprof/goroutine?debug=1"))
		t.Fatalf("informers, goroutines and heap not back to within 10%% of where they were: %v", last)
	}
	t.Logf("%d controllers created and deleted: informers %.0f -> %.0f, goroutines %.0f -> %.0f, live heap %.1f -> %.1f MiB",
		n, beforeInformers, informers, beforeGoroutines, goroutines, beforeHeap/(1<<20), heap/(1<<20))
}

// leakRound creates n resources and a controller of each, waits until the
// server watches every one, deletes the controllers, waits until it
// watches none, and deletes the resources.
func leakRound(t *testing.T, hookURL string, round, n int) {
	t.Helper()
	ctx := context.Background()
	group := fmt.Sprintf("leak%d.example.com", round)
	var crds strings.Builder
	crdNames := make([]string, n)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&crds, "%s---\n", framework.CRD{Group: group, Plural: fmt.Sprintf("leak%ds", i), Kind: fmt.Sprintf("Leak%d", i)}.Manifest())
		crdNames[i] = fmt.Sprintf("leak%ds.%s", i, group)
	}
	crds.WriteString(serverRights(group, group, []string{"*"}, parentVerbs...))
	suite.MustApply(t, crds.String())
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), append([]string{"delete", "crd", "--wait=false", "--ignore-not-found"}, crdNames...)...)
	})
	if _, stderr, err := suite.Kubectl(ctx, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, prefixed("crd/", crdNames)...)...); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	// kube-controller-manager's garbage collector and quota monitor watch
	// every resource while it exists, from when their discovery (every
	// 30 s) finds it: wait for those watches first, so that the count
	// below changes only by the server's own watch.
	var others map[string]int
	suite.Within(t, "kube-controller-manager's watch of every new resource", 2*time.Minute, func() (bool, error) {
		first := watchesOf(t, group)
		time.Sleep(2 * time.Second)
		others = watchesOf(t, group)
		watched := 0
		for _, count := range others {
			if count > 0 {
				watched++
			}
		}
		return unless(watched == n && maps.Equal(first, others), fmt.Errorf("watches %v, 2 s before %v", others, first))
	})
	names := make([]string, n)
	var controllers strings.Builder
	for i := range names {
		names[i] = fmt.Sprintf("leak-%d-%d", round, i)
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
`, names[i], group, i, hookURL)
	}
	suite.MustApply(t, controllers.String())
	for _, name := range names {
		suite.WaitRunning(t, name)
	}
	// kube-apiserver serves a watch of each controller's parents to the
	// server, beside kube-controller-manager's.
	suite.Eventually(t, "a watch on every controller's parents", func() (bool, error) {
		w := watchesOf(t, group)
		for resource, count := range others {
			if w[resource] != count+1 {
				return false, fmt.Errorf("%d watches of %s, %d before the controller ran", w[resource], resource, count)
			}
		}
		return true, nil
	})
	for _, name := range names {
		if err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	suite.Eventually(t, "the server's watch of every deleted controller's parents to end", func() (bool, error) {
		w := watchesOf(t, group)
		for resource, count := range others {
			if w[resource] != count {
				return false, fmt.Errorf("%d watches of %s, %d before the controller ran", w[resource], resource, count)
			}
		}
		return true, nil
	})
	if _, stderr, err := suite.Kubectl(ctx, append([]string{"delete", "crd", "--wait=true", "--timeout=60s"}, crdNames...)...); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}
