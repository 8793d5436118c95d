package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkMemory (B4) measures what caching a child costs the server: the
// growth of composite-apiserver's live heap while its loop creates
// memory.parents × memory.children ConfigMaps (and caches them with their
// parents, its indexes, queues and per-parent state), divided by the
// children. The baseline is a bare client-go dynamic informer on those
// ConfigMaps in this test process, measured the same way: live heap after
// a full GC, before and after it synced. A second figure adds a bare
// informer on the parents, since the loop caches those too.
//
// The server's heap is read from its /debug/pprof/heap?gc=1&debug=1, which
// collects garbage and then reports runtime.MemStats; /metrics'
// go_memstats_heap_alloc_bytes is read at any moment and would count
// garbage. The same objects stay cached by every informer of the server
// for the rest of the run, so the measurement is a difference, taken
// while nothing else changes in the cluster.
func BenchmarkMemory(b *testing.B) {
	setUp(b)
	ctx := context.Background()
	name := uniqueName("bench-memory")
	parents, children := *memoryParents, *memoryChildren
	l, hook, w, before := startWarmController(ctx, b, name, parents, *memoryTimeout)

	start := time.Now()
	w.converge(ctx, b, name, l, parents, children, *loopCreators, *memoryTimeout, "memory.timeout")
	convergedIn := time.Since(start)
	// Our own informers' caches go before this process's first reading;
	// the syncs that our writes and the loop's status writes trigger run
	// out before the server's second.
	w.close()
	if err := quiesce(ctx, hook, 3*time.Second, *memoryTimeout); err != nil {
		b.Fatal(err)
	}
	after, err := serverHeap(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cached := parents * children
	loopPerChild := (float64(after) - float64(before)) / float64(cached)

	informerPerChild, withParentsPerChild, seen, err := bareInformerHeap(ctx, l.namespace(0))
	if err != nil {
		b.Fatal(err)
	}
	if seen != cached {
		b.Fatalf("the bare informer holds %d ConfigMaps in %s, want %d", seen, l.namespace(0), cached)
	}
	ratio := loopPerChild / informerPerChild
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(loopPerChild, "loop-B/child")
	b.ReportMetric(informerPerChild, "informer-B/child")
	b.ReportMetric(ratio, "ratio-vs-informer")
	b.ReportMetric(withParentsPerChild, "informer+parents-B/child")
	b.ReportMetric(float64(cached), "children")
	b.ReportMetric(float64(after)/(1<<20), "server-heap-MiB")
	b.Logf("memory: the loop converged %d parents × %d ConfigMaps in %.1f s; composite-apiserver's live heap grew from %.1f MiB to %.1f MiB: %.0f bytes per child; "+
		"a bare dynamic informer on the same ConfigMaps: %.0f bytes per child (%.2f×); with a bare informer on their parents too: %.0f bytes per child (%.2f×)",
		parents, children, convergedIn.Seconds(), float64(before)/(1<<20), float64(after)/(1<<20), loopPerChild,
		informerPerChild, ratio, withParentsPerChild, loopPerChild/withParentsPerChild)
}

// startWarmController starts the measured controller name over parents
// and reads the server's live heap once it has warmed up: the "before" of
// a memory measurement. The controller starts before that reading, so that
// the heap of its (shared) informers, already synced on the objects of
// other benchmarks, is in both readings; and what the server builds once,
// on its first syncs (schemas, clients, connections), is not per child:
// one parent, outside the layout, converges first (warmUp).
func startWarmController(ctx context.Context, b *testing.B, name string, parents int, timeout time.Duration) (layout, *hookStats, *watcher, uint64) {
	b.Helper()
	l, hook, w := startMeasuredController(ctx, b, name, parents, 0)
	if err := warmUp(ctx, name, timeout); err != nil {
		b.Fatal(err)
	}
	if err := quiesce(ctx, hook, 2*time.Second, time.Minute); err != nil {
		b.Fatal(err)
	}
	before, err := serverHeap(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return l, hook, w, before
}

// warmUp creates a parent of controller in a namespace of its own and
// waits until its status catches up.
func warmUp(ctx context.Context, controller string, timeout time.Duration) error {
	ns := controller + "w"
	if err := suite.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	p := newParent(ns, "warm", controller, *memoryChildren)
	if _, err := env.dyn.Resource(hellosGVR).Namespace(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := env.dyn.Resource(hellosGVR).Namespace(ns).Get(ctx, "warm", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		return observed == got.GetGeneration(), nil
	})
	if err != nil {
		return fmt.Errorf("the warm-up parent %s/warm did not converge: %w", ns, err)
	}
	return nil
}

// serverHeap is composite-apiserver's live heap: the median HeapAlloc of
// three reads of its heap profile, each right after a GC, which smooths the
// little the server allocates between a GC and its reading.
func serverHeap(ctx context.Context) (uint64, error) {
	var reads []uint64
	for i := 0; i < 3; i++ {
		data, err := serverGet(ctx, "/debug/pprof/heap?gc=1&debug=1")
		if err != nil {
			return 0, fmt.Errorf("can't read composite-apiserver's heap (is --profiling off?): %w", err)
		}
		n, err := heapAllocOf(data)
		if err != nil {
			return 0, err
		}
		reads = append(reads, n)
		time.Sleep(200 * time.Millisecond)
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i] < reads[j] })
	return reads[1], nil
}

// heapAllocOf finds "# HeapAlloc = <n>" in a debug=1 heap profile, where
// runtime/pprof prints the runtime.MemStats it read before the profile.
func heapAllocOf(profile []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no HeapAlloc in the heap profile")
}

// bareInformerHeap syncs a bare dynamic informer on the ConfigMaps of
// namespace, then adds one on the parents there, and returns
// this process's live heap growth per ConfigMap after each, and the
// ConfigMaps held.
func bareInformerHeap(ctx context.Context, namespace string) (perChild, withParentsPerChild float64, children int, err error) {
	stop := make(chan struct{})
	defer close(stop)
	heap0 := liveHeap()
	cmFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(env.dyn, 0, namespace, nil)
	cmInf := cmFactory.ForResource(configMapsGVR).Informer()
	cmFactory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), cmInf.HasSynced) {
		return 0, 0, 0, fmt.Errorf("the bare ConfigMap informer did not sync")
	}
	children = len(cmInf.GetStore().ListKeys())
	if children == 0 {
		return 0, 0, 0, fmt.Errorf("the bare ConfigMap informer holds nothing")
	}
	heap1 := liveHeap()
	parentFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(env.dyn, 0, namespace, nil)
	parentInf := parentFactory.ForResource(hellosGVR).Informer()
	parentFactory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), parentInf.HasSynced) {
		return 0, 0, 0, fmt.Errorf("the bare parent informer did not sync")
	}
	heap2 := liveHeap()
	// Both caches must still be reachable when the heap is read.
	runtime.KeepAlive(cmInf)
	runtime.KeepAlive(parentInf)
	perChild = (float64(heap1) - float64(heap0)) / float64(children)
	withParentsPerChild = (float64(heap2) - float64(heap0)) / float64(children)
	return perChild, withParentsPerChild, children, nil
}

// liveHeap is this process's HeapAlloc after two full GCs (the second
// frees what finalizers of the first kept).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
