package bench

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var (
	podParents    = flag.Int("pods.parents", 0, "BenchmarkPodChildren: parents whose hook returns -pods.per-parent Pods each; 0 skips B10 (hack/bench.sh runs it with --b10, 500 parents). Any other value starts the run's stack with pods (kube-scheduler, kwok, kube-controller-manager's pod controllers), so B10 must then be the only benchmark selected")
	podsPerParent = flag.Int("pods.per-parent", 3, "BenchmarkPodChildren: Pods per parent")
	podTimeout    = flag.Duration("pods.timeout", 10*time.Minute, "BenchmarkPodChildren: how long each phase waits for all its Pods to be Ready, and then for its namespace to be gone")
)

// podRights is what an administrator grants composite-apiserver (a
// ClusterRole aggregated into its own, as the README says) for B10's
// controllers: Pods, beside the ConfigMaps every stack grants.
var podRights = framework.AggregatedRights("composite-apiserver-bench-pods", `- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`)

// podBenchmark is B10's name, selected apart from the others (podStackOptions).
const podBenchmark = "BenchmarkPodChildren"

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// podParentLabel names a benchmark Pod's parent, for the watch to
// attribute its readiness.
const podParentLabel = "bench-parent"

// podStackOptions turns the pod stack on when B10 runs (-pods.parents and a
// -bench pattern that selects it). The other benchmarks would then share
// its kube-scheduler, kwok and kube-controller-manager's pod controllers
// (a ServiceAccount and a kube-root-ca.crt ConfigMap written into every
// namespace, say) and measure something else than they say: B10 must run
// alone.
func podStackOptions(pattern string, opts framework.Options) (framework.Options, error) {
	if *podParents <= 0 || !matchesBenchmark(pattern, "", podBenchmark) {
		return opts, nil
	}
	if matchesBenchmark(pattern, "", benchmarks...) {
		return opts, fmt.Errorf("-pods.parents=%d starts the benchmarks' stack with pods (kube-scheduler, kwok, kube-controller-manager's pod controllers), which the other benchmarks selected by -bench %q would share: select %s alone (-bench '^%s$'), as hack/bench.sh --b10 does",
			*podParents, pattern, podBenchmark, podBenchmark)
	}
	return framework.WithPods(opts), nil
}

// benchPod is Pod i of parent, the same from the loop's hook and from the
// baseline: one container and nothing else. The ServiceAccount admission
// plugin adds its token volume, defaulting the rest, as to any Pod.
func benchPod(parent string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]interface{}{
			"name":   fmt.Sprintf("%s-%d", parent, i),
			"labels": map[string]interface{}{podParentLabel: parent},
		},
		"spec": map[string]interface{}{
			// kwok pulls no image: any name would do; this one is what a
			// real node would run for a container that does nothing.
			"containers": []interface{}{map[string]interface{}{"name": "app", "image": "registry.k8s.io/pause:3.10"}},
		},
	}}
}

// podHookResponse is B10's hook, a CatSet's in miniature: spec.children
// Pods <parent>-<i>, and a status saying how many of the Pods it observed
// are Ready, phase Ready once all are, as a hook that gates on readiness
// reports it. Each Pod that turns Ready changes its answer.
func podHookResponse(_ *hookStats, req *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
	n, found, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "children")
	if !found {
		n = 3
	}
	name := req.Parent.GetName()
	children := make([]*unstructured.Unstructured, 0, n)
	for i := 0; i < int(n); i++ {
		children = append(children, benchPod(name, i))
	}
	ready := int64(0)
	for _, observed := range req.Children[hookapi.GroupKey("v1", "Pod")] {
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(observed.Object, &pod); err == nil && podReady(&pod) {
			ready++
		}
	}
	phase := "Creating"
	if ready == n {
		phase = "Ready"
	}
	return &hookapi.SyncHookResponse{
		Status:   map[string]interface{}{"pods": n, "ready": ready, "phase": phase},
		Children: children,
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWatcher follows the Pods of one namespace through an informer and
// notes when each is first seen Ready, and every Pod that came and went:
// a Pod recreated by its controller shows as a second UID of its name.
type podWatcher struct {
	mu        sync.Mutex
	sent      map[string]time.Time // parent name -> when its creation was sent
	created   map[string]time.Time // Pod name -> when first seen
	scheduled map[string]time.Time // Pod name -> when first seen bound to a node
	ready     map[string]time.Time // Pod name -> when first seen Ready
	uids      map[string]bool
	deleted   int
	lastReady time.Time
	pods      map[string]*corev1.Pod // the last seen state, for a report of the stragglers
	stop      chan struct{}
	stopOnce  sync.Once
}

func watchPods(ctx context.Context, namespace string) (*podWatcher, error) {
	w := &podWatcher{sent: map[string]time.Time{}, created: map[string]time.Time{}, scheduled: map[string]time.Time{}, ready: map[string]time.Time{}, uids: map[string]bool{}, pods: map[string]*corev1.Pod{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.seen,
		UpdateFunc: func(_, cur interface{}) { w.seen(cur) },
		DeleteFunc: func(interface{}) {
			w.mu.Lock()
			w.deleted++
			w.mu.Unlock()
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.close()
		return nil, fmt.Errorf("the Pod informer of namespace %s did not sync", namespace)
	}
	return w, nil
}

func (w *podWatcher) seen(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.uids[string(pod.UID)] = true
	w.pods[pod.Name] = pod
	if _, seen := w.created[pod.Name]; !seen {
		w.created[pod.Name] = now
	}
	if _, seen := w.scheduled[pod.Name]; !seen && pod.Spec.NodeName != "" {
		w.scheduled[pod.Name] = now
	}
	if _, seen := w.ready[pod.Name]; !seen && podReady(pod) {
		w.ready[pod.Name] = now
		w.lastReady = now
	}
}

func (w *podWatcher) close() { w.stopOnce.Do(func() { close(w.stop) }) }

// sending notes that parent's creation is being sent.
func (w *podWatcher) sending(parent string) {
	w.mu.Lock()
	w.sent[parent] = time.Now()
	w.mu.Unlock()
}

// waitReady waits until want Pods are Ready, at most timeout, and returns
// when the last of them was seen Ready.
func (w *podWatcher) waitReady(ctx context.Context, want int, timeout time.Duration) (time.Time, error) {
	var last time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		last = w.lastReady
		return len(w.ready) >= want, nil
	})
	if err != nil {
		return last, fmt.Errorf("%d of %d Pods Ready within %s (-pods.timeout); not Ready: %s", w.readyCount(), want, timeout, w.stragglers(5))
	}
	return last, nil
}

func (w *podWatcher) readyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ready)
}

// stragglers describes up to limit Pods seen but never Ready: their phase
// and node say where the stand-in stopped.
func (w *podWatcher) stragglers(limit int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, pod := range w.pods {
		if _, ok := w.ready[name]; !ok {
			out = append(out, fmt.Sprintf("%s (phase %q, node %q)", name, pod.Status.Phase, pod.Spec.NodeName))
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return fmt.Sprintf("%d seen, e.g. %v", len(out), out)
}

// latencies are, per parent all of whose perParent Pods are Ready, the
// time from sending its creation to its last Pod seen Ready (total), split
// in the time to its last Pod seen created (created: the client's or the
// loop's part) and from there to the last Ready (ready: the stand-in's).
func (w *podWatcher) latencies(perParent int) (total, created, ready []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for parent, sent := range w.sent {
		lastCreated, lastReady, ok := w.lastOf(parent, perParent)
		if ok {
			total = append(total, lastReady.Sub(sent))
			created = append(created, lastCreated.Sub(sent))
			ready = append(ready, lastReady.Sub(lastCreated))
		}
	}
	return sortedCopy(total), sortedCopy(created), sortedCopy(ready)
}

// stages are, per Ready Pod, the time from seeing it created to seeing it
// bound to a node (kube-scheduler's part, its queue included), and from
// there to seeing it Ready (kwok's).
func (w *podWatcher) stages() (toScheduled, toReady []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, ready := range w.ready {
		if scheduled, ok := w.scheduled[name]; ok {
			toScheduled = append(toScheduled, scheduled.Sub(w.created[name]))
			toReady = append(toReady, ready.Sub(scheduled))
		}
	}
	return sortedCopy(toScheduled), sortedCopy(toReady)
}

// lastOf is when the last of parent's Pods was seen created and when the
// last was seen Ready; ok once all are Ready. w.mu is held.
func (w *podWatcher) lastOf(parent string, perParent int) (created, ready time.Time, ok bool) {
	for i := 0; i < perParent; i++ {
		name := fmt.Sprintf("%s-%d", parent, i)
		r, isReady := w.ready[name]
		if !isReady {
			return time.Time{}, time.Time{}, false
		}
		if c := w.created[name]; c.After(created) {
			created = c
		}
		if r.After(ready) {
			ready = r
		}
	}
	return created, ready, true
}

// churn is how many Pods beyond want were created (a second UID of a name)
// and how many were deleted while the phase ran.
func (w *podWatcher) churn(want int) (recreated, deleted int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(0, len(w.uids)-want), w.deleted
}

// podNamespace creates a phase's namespace and waits for its default
// ServiceAccount, without which admission refuses Pods. When b ends the
// namespace is deleted and b waits until it is gone, its Pods with it, so
// that the next phase does not share the stand-in with their termination.
func podNamespace(ctx context.Context, b *testing.B, l layout) string {
	b.Helper()
	ns := l.namespace(0)
	if err := suite.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		start := time.Now()
		namespaces := env.kube.CoreV1().Namespaces()
		if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.Errorf("can't delete namespace %s: %v", ns, err)
			return
		}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, *podTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			b.Errorf("namespace %s, deleted, is still there after %s (-pods.timeout): %v", ns, *podTimeout, err)
			return
		}
		b.Logf("namespace %s and its Pods gone %.1f s after its deletion", ns, time.Since(start).Seconds())
	})
	if err := suite.WaitDefaultServiceAccount(ctx, ns); err != nil {
		b.Fatal(err)
	}
	return ns
}

// standIn is the CPU time the stand-in's processes, which cpuNow does not
// count, have used so far.
type standIn struct{ scheduler, kwok, patchSeconds, patches float64 }

func standInNow(b *testing.B) standIn {
	scheduler, err := suite.SchedulerCPUSeconds()
	if err != nil {
		b.Logf("can't read kube-scheduler's CPU time: %v", err)
	}
	kwok, err := suite.KwokCPUSeconds()
	if err != nil {
		b.Logf("can't read kwok's CPU time: %v", err)
	}
	sum, count, err := podStatusPatchSeconds(context.Background())
	if err != nil {
		b.Logf("no latency of the Pods' status patches: %v", err)
	}
	return standIn{scheduler: scheduler, kwok: kwok, patchSeconds: sum, patches: count}
}

// reportStandIn reports the CPU kube-scheduler and kwok spent per Pod
// since before, and how long kube-apiserver took on average to answer the
// status patches of Pods (kwok's, which plays its Stages on 4 workers:
// their latency bounds its rate): whether the stand-in had more to do in
// one phase than in the other, or waited longer on kube-apiserver.
func reportStandIn(ctx context.Context, b *testing.B, before standIn, pods int) {
	after := standInNow(b)
	scheduler := (after.scheduler - before.scheduler) * 1000 / float64(pods)
	kwok := (after.kwok - before.kwok) * 1000 / float64(pods)
	b.ReportMetric(scheduler, "scheduler-cpu-ms/pod")
	b.ReportMetric(kwok, "kwok-cpu-ms/pod")
	patch := 0.0
	if sum, count, err := podStatusPatchSeconds(ctx); err != nil {
		b.Logf("no latency of the Pods' status patches: %v", err)
	} else if count > before.patches {
		patch = (sum - before.patchSeconds) * 1000 / (count - before.patches)
		b.ReportMetric(patch, "pod-status-patch-ms")
	}
	b.Logf("the stand-in: CPU per Pod kube-scheduler %.2f ms, kwok %.2f ms; kube-apiserver answered the Pods' status patches in %.1f ms on average", scheduler, kwok, patch)
}

// podStatusPatchSeconds reads the sum and count of
// apiserver_request_duration_seconds of PATCH pods/status from
// kube-apiserver's /metrics.
func podStatusPatchSeconds(ctx context.Context) (sum, count float64, err error) {
	data, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("can't read kube-apiserver's /metrics: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "apiserver_request_duration_seconds_sum" && name != "apiserver_request_duration_seconds_count") {
			continue
		}
		labels, value, err := parseSample("{" + rest)
		if err != nil {
			return 0, 0, fmt.Errorf("can't parse %q: %w", line, err)
		}
		if labels["resource"] != "pods" || labels["subresource"] != "status" || labels["verb"] != "PATCH" || labels["dry_run"] != "" {
			continue
		}
		if strings.HasSuffix(name, "_sum") {
			sum += value
		} else {
			count += value
		}
	}
	return sum, count, nil
}

// podResult is what one phase measured.
type podResult struct {
	rate      float64 // Pods Ready a second, from the first creation sent
	perParent float64 // ms per parent
}

// reportPods reports and returns what a phase measured from start until
// lastReady, and logs it after what.
func reportPods(b *testing.B, what string, w *podWatcher, parents, pods int, start, lastReady time.Time, createdIn time.Duration) podResult {
	elapsed := lastReady.Sub(start)
	lat, toCreated, toReady := w.latencies(*podsPerParent)
	toBound, toKwokReady := w.stages()
	recreated, deleted := w.churn(pods)
	r := podResult{rate: float64(pods) / elapsed.Seconds(), perParent: elapsed.Seconds() * 1000 / float64(parents)}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.rate, "pods/s")
	b.ReportMetric(elapsed.Seconds(), "elapsed-s")
	b.ReportMetric(r.perParent, "ms-per-parent")
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(toCreated, 0.5)), "created-p50-ms")
	b.ReportMetric(ms(percentile(toReady, 0.5)), "ready-p50-ms")
	b.ReportMetric(ms(percentile(toBound, 0.5)), "pod-bound-p50-ms")
	b.ReportMetric(ms(percentile(toKwokReady, 0.5)), "pod-bound-to-ready-p50-ms")
	b.ReportMetric(float64(recreated), "pods-recreated")
	b.Logf("%s: %d parents × %d Pods, creations sent in %.1f s; all %d Pods Ready %.1f s after the first was sent: %.1f Pods/s, %.1f ms per parent; "+
		"parent creation to its last Pod Ready p50 %.0f ms, p99 %.0f ms: to its last Pod created p50 %.0f ms, p99 %.0f ms, and from there to Ready p50 %.0f ms, p99 %.0f ms; "+
		"per Pod, created to bound to a node p50 %.0f ms, p99 %.0f ms, bound to Ready p50 %.0f ms, p99 %.0f ms; %d Pods recreated, %d deleted meanwhile",
		what, parents, *podsPerParent, createdIn.Seconds(), pods, elapsed.Seconds(), r.rate, r.perParent,
		ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(toCreated, 0.5)), ms(percentile(toCreated, 0.99)),
		ms(percentile(toReady, 0.5)), ms(percentile(toReady, 0.99)), ms(percentile(toBound, 0.5)), ms(percentile(toBound, 0.99)),
		ms(percentile(toKwokReady, 0.5)), ms(percentile(toKwokReady, 0.99)), recreated, deleted)
	if recreated > 0 || deleted > 0 {
		b.Errorf("%s: %d Pods were recreated and %d deleted while they became Ready: nothing should have replaced a Pod", what, recreated, deleted)
	}
	return r
}

// runPodBaseline is what a plain client-go program does to get the loop's
// Pods: per parent, create it (a Widget, which no controller watches) and
// its Pods, owned by it and labelled as the loop labels them, on
// loop.baseline-workers goroutines with no client-side rate limit, and wait
// until the stand-in (kube-scheduler and kwok) has made them all Ready.
func runPodBaseline(b *testing.B, parents int) podResult {
	ctx := context.Background()
	if err := installWidgets(ctx); err != nil {
		b.Fatal(err)
	}
	perParent, pods := *podsPerParent, parents**podsPerParent
	ns := podNamespace(ctx, b, newLayout(uniqueName("bench-pods-baseline"), parents, 0))
	w, err := watchPods(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.close)
	before, err := writeCounts(ctx, "pods", "widgets")
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore, standInBefore := cpuNow(b), standInNow(b)
	start := time.Now()
	if _, err := forEach(ctx, parents, *loopBaselineWorkers, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("w%d", i)
		w.sending(name)
		parent := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "bench.example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": name, "namespace": ns},
			"spec":     map[string]interface{}{"children": int64(perParent)},
		}}
		created, err := env.dyn.Resource(widgetsGVR).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		for c := 0; c < perParent; c++ {
			pod := benchPod(name, c)
			pod.SetOwnerReferences([]metav1.OwnerReference{engine.ControllerRef(created)})
			pod.SetLabels(map[string]string{podParentLabel: name, engine.ControllerUIDLabel: string(created.GetUID())})
			if _, err := env.dyn.Resource(podsGVR).Namespace(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	createdIn := time.Since(start)
	last, err := w.waitReady(ctx, pods, *podTimeout)
	if err != nil {
		b.Fatalf("client-go baseline: %v", err)
	}
	reportCPU(b, cpuBefore, pods)
	reportStandIn(ctx, b, standInBefore, pods)
	logWrites(ctx, b, "client-go baseline", before)
	return reportPods(b, fmt.Sprintf("client-go baseline (%d workers)", *loopBaselineWorkers), w, parents, pods, start, last, createdIn)
}

// logWrites logs the writes of Pods and parents since before, by anyone:
// the creations, kube-scheduler's bindings, kwok's status patches, and
// whatever else wrote a Pod.
func logWrites(ctx context.Context, b *testing.B, what string, before map[string]float64) {
	after, err := writeCounts(ctx, "pods", "widgets", "hellos")
	if err != nil {
		b.Logf("%s: no write counts: %v", what, err)
		return
	}
	writes, _ := diffCounts(before, after)
	b.Logf("%s: writes to kube-apiserver (every client's): %s", what, formatCounts(writes))
}

// runPodLoop has a CompositeController whose hook returns the Pods of
// benchPod create them for parents Hellos, created on loop.creators
// goroutines, and waits until they are all Ready and every parent's status
// says so.
func runPodLoop(b *testing.B, parents int, baseline podResult) {
	ctx := context.Background()
	name := uniqueName("bench-pods-loop")
	perParent, pods := *podsPerParent, parents**podsPerParent
	l := newLayout(name, parents, 0)
	ns := podNamespace(ctx, b, l)
	controller := framework.ControllerFixture{Name: name, HookURL: env.hook.serve(name, podHookResponse), SelectBy: "bench", Timeout: "30s", Child: podsGVR, Method: *podChildUpdate}
	if _, err := applyController(ctx, controller); err != nil {
		b.Fatal(err)
	}
	// Registered after the namespace's deletion, so run before it: no
	// sync recreates a Pod while the namespace goes.
	b.Cleanup(func() { deleteController(name) })
	hook := env.hook.of(name)
	pw, err := watchPods(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pw.close)
	// B2's watcher of the parents: observed once status.phase is Ready
	// for their generation.
	w, err := watch(ctx, name, l, true, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.close)
	before, err := writeCounts(ctx, "pods", "widgets", "hellos")
	if err != nil {
		b.Fatal(err)
	}
	dryRunsBefore, err := countDryRuns(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore, standInBefore := cpuNow(b), standInNow(b)
	start := time.Now()
	if err := w.createParents(ctx, name, l, parents, perParent, *loopCreators); err != nil {
		b.Fatal(err)
	}
	createdIn := time.Since(start)
	w.mu.Lock()
	pw.mu.Lock()
	for key, t := range w.created {
		pw.sent[strings.TrimPrefix(key, ns+"/")] = t
	}
	pw.mu.Unlock()
	w.mu.Unlock()
	last, err := pw.waitReady(ctx, pods, *podTimeout)
	if err != nil {
		b.Fatalf("loop: %v; hook calls so far %d", err, hook.calls.Load())
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, *podTimeout, true, func(context.Context) (bool, error) {
		observed, _, _ := w.progress()
		return observed == parents, nil
	}); err != nil {
		observed, _, _ := w.progress()
		b.Fatalf("loop: every Pod is Ready, but %d of %d parents' status says so after %s more; e.g. %v", observed, parents, *podTimeout, w.missing(5))
	}
	_, _, statusAt := w.progress()
	reportCPU(b, cpuBefore, pods)
	reportStandIn(ctx, b, standInBefore, pods)
	logWrites(ctx, b, "loop", before)
	r := reportPods(b, "loop", pw, parents, pods, start, last, createdIn)
	statusLat := w.latencies()
	settled := waitIdle(hook, 2*time.Second, 2*time.Minute)
	calls := hook.calls.Load()
	b.ReportMetric(r.rate/baseline.rate, "ratio-vs-baseline")
	b.ReportMetric(r.perParent/baseline.perParent, "time-per-parent-vs-baseline")
	b.ReportMetric(statusAt.Sub(start).Seconds(), "status-s")
	b.ReportMetric(ms(percentile(statusLat, 0.5)), "status-p50-ms")
	b.ReportMetric(float64(calls)/float64(parents), "hook-calls-per-parent")
	b.Logf("loop: %.2f× the client-go baseline's %.1f Pods/s (%.1f ms per parent, %.2f× the baseline's %.1f); every parent's status said its Pods Ready %.1f s after the first creation (parent creation to status p50 %.0f ms); "+
		"idle %.1f s later (no hook call for 2 s): %d hook calls, %.2f per parent; parents by calls: %v",
		r.rate/baseline.rate, baseline.rate, r.perParent, r.perParent/baseline.perParent, baseline.perParent,
		statusAt.Sub(start).Seconds(), ms(percentile(statusLat, 0.5)), settled.Seconds(), calls, float64(calls)/float64(parents), hook.perParent())
	dryRunsBefore.report(ctx, b, "convergence")
	measurePodDryRuns(ctx, b, name, hook, pw, parents)
}

// BenchmarkPodChildren (B10, only with -pods.parents) is B2's shape with
// Pods as children, on the pod stack (framework.WithPods: kube-scheduler
// binds, kwok's Stages make each Pod Running and Ready at once): a
// CompositeController whose in-process hook returns -pods.per-parent Pods
// per parent, from creating pods.parents parents until all their Pods are
// Ready (seen on the Pods themselves) and every parent's status says so,
// against a plain client-go program creating the same Pods (and their
// parents, of a CRD no controller watches) in the same run, made Ready by
// the same stand-in. Each phase has a namespace of its own, deleted and
// gone before the next starts. It reports Pods Ready a second, the loop's
// as a ratio of the baseline's, time per parent, and the hook's calls per
// parent once it is idle; it fails if a Pod is recreated or deleted while
// they become Ready.
func BenchmarkPodChildren(b *testing.B) {
	if *podParents <= 0 {
		b.Skip("-pods.parents=0")
	}
	if !childUpdateMethods[*podChildUpdate] {
		b.Fatalf("-pods.child-update=%q: want OnDelete, Recreate or InPlace", *podChildUpdate)
	}
	setUp(b)
	parents := *podParents
	logNodes(b)
	// Granted first: kube-controller-manager aggregates it into the
	// server's ClusterRole while the baseline runs.
	if err := suite.Apply(context.Background(), podRights); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("parents=%d", parents), func(b *testing.B) {
		var baseline podResult
		b.Run("client-go-baseline", func(b *testing.B) {
			baseline = runPodBaseline(b, parents)
		})
		b.Run("loop", func(b *testing.B) {
			if baseline.rate == 0 {
				b.Log("measuring the client-go baseline first")
				baseline = runPodBaseline(b, parents)
			}
			runPodLoop(b, parents, baseline)
		})
	})
}

// logNodes logs the stand-in's nodes and how many Pods each may hold
// (kwok's node-initialize Stage gives its nodes room for a million).
func logNodes(b *testing.B) {
	nodes, err := env.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, fmt.Sprintf("%s (Ready %v, allocatable pods %s)", n.Name, framework.NodeReady(&n), n.Status.Allocatable.Pods()))
	}
	b.Logf("pod stack nodes: %s", strings.Join(out, ", "))
}
