package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// widgetCRD is the baseline's parent resource: like hellos, in a group of
// its own, so that no controller of the benchmarks watches it.
var widgetCRD = framework.CRD{Group: "bench.example.com", Plural: "widgets", Kind: "Widget"}.Manifest()

var widgetsGVR = schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}

var (
	widgetOnce sync.Once
	widgetErr  error
)

func installWidgets(ctx context.Context) error {
	widgetOnce.Do(func() {
		if widgetErr = suite.Apply(ctx, widgetCRD); widgetErr != nil {
			return
		}
		if _, stderr, err := suite.Kubectl(ctx, "wait", "--for=condition=Established", "crd/widgets.bench.example.com", "--timeout=60s"); err != nil {
			widgetErr = fmt.Errorf("CRD widgets.bench.example.com not established: %w: %s", err, stderr)
		}
	})
	return widgetErr
}

// baselineMode is how runBaseline writes the loop's result.
type baselineMode int

const (
	// createChildren creates each child: the fewest writes.
	createChildren baselineMode = iota
	// applyChildren server-side-applies each child under a field manager
	// of the loop's style, with force: the write the loop must make (it
	// applies so that it can prune and take ownership), without the loop
	// around it.
	applyChildren
	// applyWatched is applyChildren while the program watches what it
	// writes as any controller of it must: dynamic informers (JSON into
	// Unstructured, as the loop's and Metacontroller's) of the ConfigMaps
	// and of its parents, all namespaces, decoding every event. The
	// floor of a controller's cost: the loop against it is what its queue,
	// hook call, plan and status cost on top.
	applyWatched
)

// runBaseline is what a plain client-go program does to get the loop's
// result: per parent, create it, write its ConfigMaps (owned by it,
// labelled as the loop labels them) as mode says, and write its status, on
// loop.baseline-workers goroutines with no client-side rate limit. Its
// p50-ms and p99-ms are, like the loop's, from sending a parent's creation
// to its status being written; req-p50-ms is per request.
func runBaseline(b *testing.B, parents int, mode baselineMode) (rate float64) {
	ctx := context.Background()
	if err := installWidgets(ctx); err != nil {
		b.Fatal(err)
	}
	children := *loopChildren
	base, what := "bench-baseline", "client-go baseline"
	writeChild := createChild
	if mode != createChildren {
		base, what = "bench-apply", "client-go apply baseline"
		if mode == applyWatched {
			base, what = "bench-watched", "client-go apply baseline with informers"
		}
		manager := definition.FieldManager(uniqueName(base))
		writeChild = func(ctx context.Context, cm *corev1.ConfigMap) error { return applyChild(ctx, cm, manager) }
	}
	if mode == applyWatched {
		stop, err := watchEverything(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer close(stop)
	}
	l := newLayout(uniqueName(base), parents, *loopPerNamespace)
	if err := l.create(ctx, parents); err != nil {
		b.Fatal(err)
	}
	if *loopCleanPhases {
		// Deleted before it returns, even when the loop's phase measures
		// it first: the loop must not share the cluster with its objects.
		defer l.deleteAll(b, parents)
	}
	var mu sync.Mutex
	var lat []time.Duration
	timed := func(f func() error) error {
		start := time.Now()
		err := f()
		d := time.Since(start)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return err
	}
	allBefore, err := allCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore := cpuNow(b)
	start := time.Now()
	if dir := *loopCPUProfile; dir != "" {
		go profileAPIServer(ctx, b, filepath.Join(dir, fmt.Sprintf("apiserver-%s-%d.pprof", strings.TrimPrefix(base, "bench-"), parents)))
	}
	perParent, err := forEach(ctx, parents, *loopBaselineWorkers, func(ctx context.Context, i int) error {
		ns := l.namespace(i)
		parent := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "bench.example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("w%d", i), "namespace": ns},
			"spec":     map[string]interface{}{"children": int64(children)},
		}}
		var created *unstructured.Unstructured
		if err := timed(func() (err error) {
			created, err = env.dyn.Resource(widgetsGVR).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		ref := engine.ControllerRef(created)
		for c := 0; c < children; c++ {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-%d", created.GetName(), c), Namespace: ns,
					Labels:          map[string]string{engine.ControllerUIDLabel: string(created.GetUID())},
					OwnerReferences: []metav1.OwnerReference{ref},
				},
				Data: map[string]string{"parent": created.GetName(), "index": strconv.Itoa(c)},
			}
			if err := timed(func() error { return writeChild(ctx, cm) }); err != nil {
				return err
			}
		}
		created.Object["status"] = map[string]interface{}{"children": int64(children), "phase": "Ready", "observedGeneration": created.GetGeneration()}
		return timed(func() error {
			_, err := env.dyn.Resource(widgetsGVR).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		})
	})
	elapsed := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	objects := parents + parents*children + parents
	rate = float64(objects) / elapsed.Seconds()
	reportCPU(b, cpuBefore, objects)
	if allAfter, err := allCounts(ctx); err == nil {
		all, total := diffCounts(allBefore, allAfter)
		b.Logf("%s: every request kube-apiserver served meanwhile (%g): %s", what, total, formatCounts(all))
	}
	sorted, sortedParents := sortedCopy(lat), sortedCopy(perParent)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate, "objects/s")
	b.ReportMetric(ms(percentile(sortedParents, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(sortedParents, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(sorted, 0.5)), "req-p50-ms")
	b.ReportMetric(elapsed.Seconds(), "elapsed-s")
	b.Logf("%s: %d parents (%s) + %d ConfigMaps + %d status updates = %d objects in %.1f s with %d workers: %.0f objects/s; "+
		"parent creation to status p50 %.0f ms, p99 %.0f ms; per request p50 %.1f ms, p99 %.1f ms",
		what, parents, l, parents*children, parents, objects, elapsed.Seconds(), *loopBaselineWorkers, rate,
		ms(percentile(sortedParents, 0.5)), ms(percentile(sortedParents, 0.99)),
		ms(percentile(sorted, 0.5)), ms(percentile(sorted, 0.99)))
	return rate
}

// watchEverything starts the applyWatched baseline's informers, and
// returns once they have listed what exists.
func watchEverything(ctx context.Context) (stop chan struct{}, err error) {
	stop = make(chan struct{})
	factory := dynamicinformer.NewDynamicSharedInformerFactory(env.dyn, 0)
	var synced []cache.InformerSynced
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, widgetsGVR} {
		inf := factory.ForResource(gvr).Informer()
		// A controller's handlers queue a key; these only see the event.
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			close(stop)
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		close(stop)
		return nil, fmt.Errorf("the baseline's informers did not sync")
	}
	return stop, nil
}

// createChild is the baseline's write of a child: a plain create.
func createChild(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := env.kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// applyChild is the apply baseline's write of a child: client-go's typed
// server-side apply of the same object, under manager, with force, as
// internal/apply applies the loop's children.
func applyChild(ctx context.Context, cm *corev1.ConfigMap, manager string) error {
	refs := make([]*metav1ac.OwnerReferenceApplyConfiguration, 0, len(cm.OwnerReferences))
	for _, r := range cm.OwnerReferences {
		refs = append(refs, metav1ac.OwnerReference().WithAPIVersion(r.APIVersion).WithKind(r.Kind).WithName(r.Name).WithUID(r.UID).
			WithController(*r.Controller).WithBlockOwnerDeletion(*r.BlockOwnerDeletion))
	}
	ac := corev1ac.ConfigMap(cm.Name, cm.Namespace).WithLabels(cm.Labels).WithOwnerReferences(refs...).WithData(cm.Data)
	_, err := env.kube.CoreV1().ConfigMaps(cm.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: manager, Force: true})
	return err
}

// layout spreads parents over namespaces: perNamespace parents in each of
// <base>-0, <base>-1, ... A namespace holding many parents makes each of
// their syncs see the others' children.
type layout struct {
	base         string
	perNamespace int
}

// startMeasuredController lays out the namespaces of parents, starts a
// controller of hellos with the benchmarks' Go hook, and watches its
// parents and children. The controller is deleted when b ends, so that it
// writes nothing while the next benchmark measures.
func startMeasuredController(ctx context.Context, b *testing.B, name string, parents, perNamespace int) (layout, *hookStats, *watcher) {
	return startMeasuredControllerAs(ctx, b, name, parents, perNamespace, false)
}

// startMeasuredControllerAs is startMeasuredController; with identity the
// controller acts as a ServiceAccount of its first namespace, allowed what
// its loop does there (and the server to impersonate it).
func startMeasuredControllerAs(ctx context.Context, b *testing.B, name string, parents, perNamespace int, identity bool) (layout, *hookStats, *watcher) {
	return startMeasured(ctx, b, name, parents, perNamespace, loopOptions{identity: identity})
}

// loopOptions vary B2's controller.
type loopOptions struct {
	// identity: the controller acts as a ServiceAccount.
	identity bool
	// tracking: its hook reports the children it observed, and a parent
	// has converged only once its status says it observed them all.
	tracking bool
	// ignoreOwnChildWrites sets spec.ownChildWrites: Ignore, as a hook
	// that does not track its children may.
	ignoreOwnChildWrites bool
	// ignoreOwnStatusWrites sets spec.ownStatusWrites: Ignore, as a hook
	// that does not read its own status may.
	ignoreOwnStatusWrites bool
	// spec edits the spec last, e.g. B11's spec.rollout.
	spec func(*acv1alpha1.CompositeControllerSpecApplyConfiguration)
	// parentsOnly: the benchmark watches the parents alone, not their
	// children (see watch).
	parentsOnly bool
	// method is the children's updateStrategy.method: InPlace when empty.
	method string
	// dryRunCost: once converged, the resync of the converged parents and
	// (-loop.child-update) a change of every child are measured in
	// dry-run applies (measureLoopDryRuns).
	dryRunCost bool
}

// loopVariants are B2's controllers at each size, by sub-benchmark name:
// the hook calls per parent with the defaults and with each opt-out.
var loopVariants = []struct {
	name string
	opts loopOptions
}{
	// A hook that answers from the parent's spec alone, and says that it
	// reads neither its children nor its status: one call per parent.
	{"loop", loopOptions{ignoreOwnChildWrites: true, ignoreOwnStatusWrites: true}},
	// A hook whose status reports the children it observed, as most real
	// hooks do, with the defaults (Metacontroller's behaviour).
	{"loop-tracking", loopOptions{tracking: true}},
	// The same, saying it does not read its own status.
	{"loop-tracking-ignore-status", loopOptions{tracking: true, ignoreOwnStatusWrites: true}},
	// The first hook, saying only that it does not track its children.
	{"loop-ignore-children", loopOptions{ignoreOwnChildWrites: true}},
}

func startMeasured(ctx context.Context, b *testing.B, name string, parents, perNamespace int, opts loopOptions) (layout, *hookStats, *watcher) {
	b.Helper()
	identity := opts.identity
	l := newLayout(name, parents, perNamespace)
	if err := l.create(ctx, parents); err != nil {
		b.Fatal(err)
	}
	if *loopCleanPhases {
		// Registered before the controller's deletion, so run after it:
		// the controller is gone before its parents go.
		b.Cleanup(func() { l.deleteAll(b, parents) })
	}
	var account *acv1alpha1.ServiceAccountReferenceApplyConfiguration
	if identity {
		ns := l.namespace(0)
		if err := suite.Apply(ctx, identityRBAC(ns, name)); err != nil {
			b.Fatal(err)
		}
		account = acv1alpha1.ServiceAccountReference().WithNamespace(ns).WithName(name)
	}
	url := env.hook.register(name)
	env.hook.of(name).tracking.Store(opts.tracking)
	controller := benchController(name, url)
	controller.Method = opts.method
	controller.Spec = func(spec *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		if account != nil {
			spec.WithServiceAccount(account)
		}
		if opts.ignoreOwnChildWrites {
			spec.WithOwnChildWrites(v1alpha1.OwnChildWritesIgnore)
		}
		if opts.ignoreOwnStatusWrites {
			spec.WithOwnStatusWrites(v1alpha1.OwnStatusWritesIgnore)
		}
		if opts.spec != nil {
			opts.spec(spec)
		}
	}
	if _, err := applyController(ctx, controller); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { deleteController(name) })
	w, err := watch(ctx, name, l, opts.tracking, !opts.parentsOnly)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.close)
	return l, env.hook.of(name), w
}

func newLayout(base string, parents, perNamespace int) layout {
	if perNamespace <= 0 || perNamespace > parents {
		perNamespace = max(parents, 1)
	}
	return layout{base: base, perNamespace: perNamespace}
}

func (l layout) namespace(i int) string { return fmt.Sprintf("%s-%d", l.base, i/l.perNamespace) }

func (l layout) prefix() string { return l.base + "-" }

func (l layout) count(parents int) int { return (parents + l.perNamespace - 1) / l.perNamespace }

// create creates the namespaces of parents.
func (l layout) create(ctx context.Context, parents int) error {
	_, err := forEach(ctx, l.count(parents), 16, func(ctx context.Context, i int) error {
		return suite.CreateNamespace(ctx, fmt.Sprintf("%s-%d", l.base, i))
	})
	return err
}

// deleteAll deletes the layout's namespaces, with everything in them, and
// waits until they are gone (-loop.clean-phases). Without it each phase of
// B2 runs in a fuller cluster than the one before: the loop, measured
// last, shares kube-apiserver's watch cache, etcd and its own informers'
// list with every baseline's objects (three times its own). Then it waits
// for the cluster to be quiet, up to 3 minutes: the garbage collector goes
// on looking up the deleted objects' owners after the namespaces are gone
// (10 lookups a second here: 3 minutes after 2,000 parents; at 10,000,
// 11,497 GETs of ConfigMaps reached the next phase before it waited).
func (l layout) deleteAll(b *testing.B, parents int) {
	ctx := context.Background()
	start := time.Now()
	if _, err := forEach(ctx, l.count(parents), 16, func(ctx context.Context, i int) error {
		return deleteNamespace(ctx, fmt.Sprintf("%s-%d", l.base, i), 15*time.Minute)
	}); err != nil {
		b.Errorf("the namespaces of %s are not gone, and the next phase shares the cluster with their objects: %v", l.base, err)
		return
	}
	gone := time.Since(start)
	busy, err := waitQuiet(ctx, 3*time.Minute)
	if err != nil {
		b.Logf("after deleting the namespaces of %s: %v; the next phase shares the cluster with that work", l.base, err)
		return
	}
	b.Logf("%s: its namespaces and their objects deleted in %.1f s, the cluster quiet %.1f s later (its first 5 s: %s)", l.base, gone.Seconds(), (time.Since(start) - gone).Seconds(), busy)
}

// waitQuiet waits until kube-apiserver serves fewer than quietRequests
// requests (watches aside) in quietWindow: what the stack's processes ask
// when nothing happens (Lease renewals) and no more.
// It returns what was asked in the first window.
func waitQuiet(ctx context.Context, timeout time.Duration) (first string, err error) {
	const quietRequests, quietWindow = 30, 5 * time.Second
	notWatches := func(verb string) bool { return verb != "WATCH" }
	deadline := time.Now().Add(timeout)
	prev, err := requestCounts(ctx, notWatches)
	if err != nil {
		return "", err
	}
	for {
		time.Sleep(quietWindow)
		cur, err := requestCounts(ctx, notWatches)
		if err != nil {
			return first, err
		}
		diff, total := diffCounts(prev, cur)
		if first == "" {
			first = formatCounts(diff)
		}
		if total < quietRequests {
			return first, nil
		}
		if time.Now().After(deadline) {
			return first, fmt.Errorf("the cluster is not quiet after %s: %g requests in the last %s: %s", timeout, total, quietWindow, formatCounts(diff))
		}
		prev = cur
	}
}

func (l layout) String() string {
	return fmt.Sprintf("%d per namespace", l.perNamespace)
}

// watcher follows a benchmark's parents (labelled bench=<controller>) and
// the controlled ConfigMaps in its namespaces through informers, and notes
// when each parent's status first catches up with its generation (and,
// for a tracking hook, says it observed all its children) and when each
// ConfigMap appears.
type watcher struct {
	mu       sync.Mutex
	created  map[string]time.Time // parent namespace/name -> when its creation was sent
	observed map[string]time.Time // parent namespace/name -> when observedGeneration == generation was first seen
	cms      map[string]bool
	lastCM   time.Time
	// children: the ConfigMaps are watched, and counted in cms.
	children bool
	stop     chan struct{}
	stopOnce sync.Once
}

// watch watches the parents of controller in l, and their children when
// children is true. B2's phases watch the parents alone (-loop.watch-
// children): a parent's status is written once its children's applies
// returned, so the children are counted with one list after the phase is
// measured, and the benchmark's watch of 100,000 ConfigMaps does not
// share the two cores with the loop it measures (the baselines have none).
func watch(ctx context.Context, controller string, l layout, tracking, children bool) (*watcher, error) {
	w := &watcher{created: map[string]time.Time{}, observed: map[string]time.Time{}, cms: map[string]bool{}, children: children, stop: make(chan struct{})}
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(env.dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = "bench=" + controller
	})
	parentInf := dynFactory.ForResource(hellosGVR).Informer()
	onParent := func(obj interface{}) {
		u, ok := obj.(*unstructured.Unstructured)
		// Parents outside the layout (BenchmarkMemory's warm-up) are
		// not the benchmark's.
		if !ok || !strings.HasPrefix(u.GetNamespace(), l.prefix()) {
			return
		}
		got, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if got == 0 || got != u.GetGeneration() {
			return
		}
		if tracking {
			if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Ready" {
				return
			}
		}
		now := time.Now()
		key := u.GetNamespace() + "/" + u.GetName()
		w.mu.Lock()
		if _, seen := w.observed[key]; !seen {
			w.observed[key] = now
		}
		w.mu.Unlock()
	}
	if _, err := parentInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onParent, UpdateFunc: func(_, cur interface{}) { onParent(cur) },
	}); err != nil {
		return nil, err
	}
	dynFactory.Start(w.stop)
	synced := []cache.InformerSynced{parentInf.HasSynced}
	if children {
		cmInf, err := w.watchChildren(l)
		if err != nil {
			w.close()
			return nil, err
		}
		synced = append(synced, cmInf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		w.close()
		return nil, fmt.Errorf("the benchmark's informers did not sync")
	}
	return w, nil
}

// watchChildren starts the watch of the ConfigMaps in l, counted in w.cms.
func (w *watcher) watchChildren(l layout) (cache.SharedIndexInformer, error) {
	// The ConfigMaps are watched for their metadata only, in protobuf:
	// the measurement's own watch of the 20,000 children should weigh on
	// the shared two cores as little as it can, since the baseline has
	// none.
	meta, err := metadata.NewForConfig(env.fast)
	if err != nil {
		return nil, err
	}
	metaFactory := metadatainformer.NewSharedInformerFactory(meta, 0)
	cmInf := metaFactory.ForResource(configMapsGVR).Informer()
	prefix := l.prefix()
	if _, err := cmInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			cm, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok || !strings.HasPrefix(cm.Namespace, prefix) || metav1.GetControllerOfNoCopy(cm) == nil {
				return
			}
			now := time.Now()
			key := cm.Namespace + "/" + cm.Name
			w.mu.Lock()
			if !w.cms[key] {
				w.cms[key] = true
				w.lastCM = now
			}
			w.mu.Unlock()
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cm, ok := obj.(*metav1.PartialObjectMetadata); ok && strings.HasPrefix(cm.Namespace, prefix) {
				w.mu.Lock()
				delete(w.cms, cm.Namespace+"/"+cm.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	metaFactory.Start(w.stop)
	return cmInf, nil
}

// countChildren lists the ConfigMaps a parent controls in l's namespaces,
// in pages, metadata only.
func countChildren(ctx context.Context, l layout, parents int) (int, error) {
	meta, err := metadata.NewForConfig(env.fast)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := 0; i < l.count(parents); i++ {
		opts := metav1.ListOptions{Limit: 5000}
		for {
			list, err := meta.Resource(configMapsGVR).Namespace(l.namespace(i*l.perNamespace)).List(ctx, opts)
			if err != nil {
				return 0, fmt.Errorf("can't count the children: %w", err)
			}
			for j := range list.Items {
				if metav1.GetControllerOfNoCopy(&list.Items[j]) != nil {
					n++
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
	}
	return n, nil
}

// close stops the informers; BenchmarkMemory closes them before b ends, so
// that their cache is gone before it measures heaps.
func (w *watcher) close() { w.stopOnce.Do(func() { close(w.stop) }) }

// createParents creates parents Hellos of controller in layout l on
// workers goroutines, noting when each was sent.
func (w *watcher) createParents(ctx context.Context, controller string, l layout, parents, children, workers int) error {
	_, err := forEach(ctx, parents, workers, func(ctx context.Context, i int) error {
		p := newParent(l.namespace(i), fmt.Sprintf("p%d", i), controller, children)
		w.mu.Lock()
		w.created[p.GetNamespace()+"/"+p.GetName()] = time.Now()
		w.mu.Unlock()
		_, err := env.dyn.Resource(hellosGVR).Namespace(p.GetNamespace()).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	return err
}

// progress returns how many parents are observed, how many ConfigMaps
// exist, and when the last of either was seen.
func (w *watcher) progress() (observed, cms int, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last = w.lastCM
	for _, t := range w.observed {
		if t.After(last) {
			last = t
		}
	}
	return len(w.observed), len(w.cms), last
}

// waitConverged waits until all parents are observed and all their
// children exist, at most timeout.
func (w *watcher) waitConverged(ctx context.Context, parents, children int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		observed, cms, _ := w.progress()
		if observed == parents && cms == parents*children {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the loop did not converge %d parents within %s: %d observed, %d/%d ConfigMaps; parents without status include %v",
				parents, timeout, observed, cms, parents*children, w.missing(10))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// latencies are, for each observed parent, the time from sending its
// creation to seeing its status caught up.
func (w *watcher) latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for key, t := range w.observed {
		if c, ok := w.created[key]; ok {
			out = append(out, t.Sub(c))
		}
	}
	return sortedCopy(out)
}

// latenciesOf are the latencies of the parents keys that were observed.
func (w *watcher) latenciesOf(keys []string) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, key := range keys {
		if t, ok := w.observed[key]; ok {
			out = append(out, t.Sub(w.created[key]))
		}
	}
	return sortedCopy(out)
}

// missing names up to limit created parents whose status has not caught
// up.
func (w *watcher) missing(limit int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key := range w.created {
		if _, ok := w.observed[key]; !ok {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// BenchmarkLoopConvergence measures the controller loop end to end, at
// each size of loop.parents: from creating the parents (on loop.creators
// workers) until every parent's status.observedGeneration equals its
// generation and all of their loop.children ConfigMaps exist. objects =
// parents + children + status writes. It runs the controllers of
// loopVariants at each size: "loop", whose hook answers the same whatever
// children it observes and reads no status, and says so
// (spec.ownChildWrites and ownStatusWrites: Ignore), "loop-tracking", whose
// hook reports the children it observed, as most real hooks do, with the
// defaults (a parent has converged once its status says it observed them
// all), and the same two with one opt-out each. Each reports its hook
// calls per parent once the hook is idle. The baseline, run at the same size
// just before, is a plain client-go program writing the same objects (of
// another CRD, in another namespace) to the same kube-apiserver; the apply
// baseline, run after it, is the same program server-side-applying the
// children instead of creating them, the write the loop makes, and each
// variant reports its rate against both (ratio-vs-baseline,
// ratio-vs-apply-baseline). With -loop.clean-phases each phase deletes
// what it made once measured (layout.deleteAll). The last size also
// reports its p50 against the first size's: how latency grows with the
// number of parents.
func BenchmarkLoopConvergence(b *testing.B) {
	if !childUpdateMethods[*loopChildUpdate] {
		b.Fatalf("-loop.child-update=%q: want OnDelete, Recreate or InPlace", *loopChildUpdate)
	}
	setUp(b)
	var firstP50, firstPaced time.Duration
	// firstPerParent is the first size's time per parent, of each variant.
	firstPerParent := map[string]float64{}
	for i, parents := range loopParents {
		var baselineRate float64
		b.Run(fmt.Sprintf("parents=%d", parents), func(b *testing.B) {
			var applyRate, watchedRate float64
			b.Run("client-go-baseline", func(b *testing.B) {
				baselineRate = runBaseline(b, parents, createChildren)
			})
			b.Run("client-go-apply-baseline", func(b *testing.B) {
				applyRate = runBaseline(b, parents, applyChildren)
			})
			b.Run("client-go-watched-apply-baseline", func(b *testing.B) {
				watchedRate = runBaseline(b, parents, applyWatched)
				if applyRate > 0 {
					b.ReportMetric(watchedRate/applyRate, "ratio-vs-apply-baseline")
					b.Logf("client-go apply baseline with informers: %.3f× the apply baseline without", watchedRate/applyRate)
				}
			})
			for _, variant := range loopVariants {
				name := variant.name
				b.Run(name, func(b *testing.B) {
					if baselineRate == 0 && *loopBaselineFirst {
						b.Log("measuring the client-go baseline first")
						baselineRate = runBaseline(b, parents, createChildren)
					}
					// A p50 of the parents that did converge says nothing
					// of the others: compare converged sizes only.
					opts := variant.opts
					opts.method, opts.dryRunCost = *loopChildUpdate, name == "loop"
					r := runLoop(b, parents, baselineRate, opts)
					if applyRate > 0 {
						b.ReportMetric(r.rate/applyRate, "ratio-vs-apply-baseline")
						b.Logf("loop: %.0f objects/s, %.3f× the client-go apply baseline's %.0f objects/s", r.rate, r.rate/applyRate, applyRate)
					}
					if watchedRate > 0 {
						b.ReportMetric(r.rate/watchedRate, "ratio-vs-watched-apply-baseline")
						b.Logf("loop: %.3f× the client-go apply baseline with informers (%.0f objects/s)", r.rate/watchedRate, watchedRate)
					}
					if r.converged {
						switch {
						case i == 0:
							firstPerParent[name] = r.perParent
						case i == len(loopParents)-1 && firstPerParent[name] > 0:
							ratio := r.perParent / firstPerParent[name]
							b.ReportMetric(ratio, fmt.Sprintf("time-per-parent-vs-%d", loopParents[0]))
							b.Logf("loop: time per parent at %d parents is %.2f× that at %d", parents, ratio, loopParents[0])
						}
					}
					if name != "loop" {
						return
					}
					switch {
					case i == 0 && r.paced > 0:
						firstPaced = r.paced
					case i == len(loopParents)-1 && i > 0 && r.paced > 0 && firstPaced > 0:
						ratio := float64(r.paced) / float64(firstPaced)
						b.ReportMetric(ratio, fmt.Sprintf("paced-p50-vs-%d", loopParents[0]))
						b.Logf("loop: p50 of a paced new parent among %d converged ones is %.2f× the p50 among %d", parents, ratio, loopParents[0])
					}
					switch {
					case i == 0 && r.converged:
						firstP50 = r.p50
					case i == len(loopParents)-1 && i > 0 && r.converged && firstP50 > 0:
						ratio := float64(r.p50) / float64(firstP50)
						b.ReportMetric(ratio, fmt.Sprintf("p50-vs-%d", loopParents[0]))
						b.Logf("loop: p50 of parent creation to status at %d parents is %.2f× the p50 at %d", parents, ratio, loopParents[0])
					}
				})
			}
		})
	}
}

// loopResult is what one convergence measured: its p50, the p50 of the
// paced parents created after it (0 when it did not converge), whether it
// converged within loop.timeout, its objects/s, and its time per parent
// in ms.
type loopResult struct {
	p50, paced time.Duration
	converged  bool
	rate       float64
	perParent  float64
}

// runLoop measures one convergence of parents. Once converged it waits
// for the hook to be idle and reports its calls per parent
// (hook-calls-per-parent): the echoes of the loop's own writes may call it
// after the children converged.
func runLoop(b *testing.B, parents int, baselineRate float64, opts loopOptions) (r loopResult) {
	ctx := context.Background()
	name := uniqueName("bench-loop")
	children := *loopChildren
	opts.parentsOnly = !*loopWatchChildren
	l, hook, w := startMeasured(ctx, b, name, parents, *loopPerNamespace, opts)
	var paced time.Duration
	var converged bool
	var rate float64
	// One scrape of kube-apiserver's /metrics at each end: the writes and
	// reads below are filters of it.
	allBefore, err := allCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dryRunsBefore, err := countDryRuns(ctx, name)
	if err != nil {
		b.Fatal(err)
	}

	cpuBefore := cpuNow(b)
	start := time.Now()
	if dir := *loopCPUProfile; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		// The server's CPU while it converges, to see what grows with the
		// number of parents, and what it allocated over the same seconds
		// (a delta profile): the garbage collector's share follows the
		// bytes allocated. The heap at the end of those seconds says what
		// the collector has to mark: its work per cycle follows the live
		// objects, most of them the informers' caches.
		window := time.Duration(*loopProfileSeconds) * time.Second
		seconds := "?seconds=" + strconv.Itoa(*loopProfileSeconds)
		for _, p := range []struct {
			path, file string
			after      time.Duration
		}{
			{"/debug/pprof/profile" + seconds, fmt.Sprintf("loop-%d.pprof", parents), *loopProfileAfter},
			{"/debug/pprof/allocs" + seconds, fmt.Sprintf("loop-%d-allocs.pprof", parents), *loopProfileAfter},
			{"/debug/pprof/heap", fmt.Sprintf("loop-%d-heap.pprof", parents), *loopProfileAfter + window},
		} {
			go func() {
				time.Sleep(p.after)
				data, err := serverGet(ctx, p.path)
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, p.file), data, 0o644)
				}
				if err != nil {
					b.Logf("loop: no profile %s: %v", p.file, err)
				}
			}()
		}
		go profileAPIServer(ctx, b, filepath.Join(dir, fmt.Sprintf("apiserver-loop-%d.pprof", parents)))
	}
	if err := w.createParents(ctx, name, l, parents, children, *loopCreators); err != nil {
		b.Fatal(err)
	}
	createdIn := time.Since(start)

	deadline := start.Add(*loopTimeout)
	var observed, cms int
	var last time.Time
	for {
		observed, cms, last = w.progress()
		if observed == parents && (!w.children || cms == parents*children) {
			converged = true
			break
		}
		if time.Now().After(deadline) {
			last = time.Now()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !w.children {
		// Every parent's status says its children's applies returned:
		// they are counted once the phase's CPU is read, below.
		cms = parents * children
		if !converged {
			if cms, err = countChildren(ctx, l, parents); err != nil {
				b.Fatal(err)
			}
		}
	}
	elapsed := last.Sub(start)
	done := parents + cms + observed
	objects := parents + parents*children + parents
	rate = float64(done) / elapsed.Seconds()
	// Before the scrape below, so that its cost is not the loop's.
	reportCPU(b, cpuBefore, done)
	if converged && !w.children {
		n, err := countChildren(ctx, l, parents)
		if err != nil {
			b.Fatal(err)
		}
		if n != cms {
			b.Errorf("loop: every parent's status was written, yet %d of its %d ConfigMaps exist", n, cms)
		}
	}
	allAfter, err := allCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	all, total := diffCounts(allBefore, allAfter)
	writes := selectCounts(all, func(verb string) bool { return writeVerbs[verb] }, "configmaps", "hellos", "events")
	// Everyone's, the benchmark's own watches included: a relist of the
	// children shows here.
	reads := selectCounts(all, func(verb string) bool { return !writeVerbs[verb] }, "configmaps", "hellos", "events", "compositecontrollers")
	b.Logf("loop: reads of kube-apiserver while it converged (every client's): %s", formatCounts(reads))
	// Every other request too (Leases, reviews, discovery): what the loop's
	// phase asked of kube-apiserver beyond the baseline's writes, whoever
	// asked it.
	b.Logf("loop: every request kube-apiserver served while it converged (%g): %s", total, formatCounts(all))
	// Everything but our creation of the parents is the loop's (and
	// Events are also written by others, e.g. kube-controller-manager).
	childWrites := sumWhere(writes, "configmaps ")
	statusWrites := sumWhere(writes, "hellos/status ")
	otherParentWrites := sumWhere(writes, "hellos ") - float64(parents)
	eventWrites := sumWhere(writes, "events ")

	lat := w.latencies()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate, "objects/s")
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(elapsed.Seconds(), "elapsed-s")
	if baselineRate > 0 {
		b.ReportMetric(rate/baselineRate, "ratio-vs-baseline")
	}
	b.ReportMetric(float64(hook.calls.Load()), "hook-calls")
	b.ReportMetric(childWrites+statusWrites+otherParentWrites, "loop-writes")
	b.ReportMetric(eventWrites, "event-writes")
	converged01 := 0.0
	if converged {
		converged01 = 1
	}
	b.ReportMetric(converged01, "converged")
	b.ReportMetric(loopTimeout.Seconds(), "timeout-s")

	b.Logf("loop: %d parents (%s) created in %.1f s by %d workers; %s after %.1f s: %d/%d parents observed, %d/%d ConfigMaps: %.0f objects/s (%s); "+
		"parent creation to status p50 %.0f ms, p99 %.0f ms; %d hook calls; writes: %s",
		parents, l, createdIn.Seconds(), *loopCreators, map[bool]string{true: "converged", false: "NOT converged"}[converged], elapsed.Seconds(),
		observed, parents, cms, parents*children, rate, againstBaseline(rate, baselineRate),
		ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), hook.calls.Load(), formatCounts(writes))
	if !converged {
		b.Logf("loop: not converged within -loop.timeout=%s; %d objects of %d done, at this rate all would take %.0f s; parents without status include %v",
			*loopTimeout, done, objects, float64(objects)/rate, w.missing(10))
	}
	perParent := elapsed.Seconds() * 1000 / float64(parents)
	b.ReportMetric(perParent, "ms-per-parent")
	if converged {
		// The burst's follow-up syncs (each parent's children and status,
		// seen again) may still be running: count them, and let them end
		// before a new parent is measured among converged parents.
		atConvergence := hook.calls.Load()
		settled := waitIdle(hook, 2*time.Second, 2*time.Minute)
		calls := hook.calls.Load()
		b.ReportMetric(float64(calls)/float64(parents), "hook-calls-per-parent")
		b.ReportMetric(float64(calls-atConvergence), "hook-calls-after-convergence")
		b.Logf("loop: idle %.1f s after convergence (no hook call for 2 s): %d hook calls, %.2f per parent, %d of them after the parents converged; parents by calls: %v",
			settled.Seconds(), calls, float64(calls)/float64(parents), calls-atConvergence, hook.perParent())
		dryRunsBefore.report(ctx, b, "convergence")
		if *loopPaced > 0 && opts.ignoreOwnChildWrites && opts.ignoreOwnStatusWrites {
			paced = runPaced(ctx, b, w, name, l, parents)
		}
		if opts.dryRunCost {
			measureLoopDryRuns(ctx, b, name, l, hook, w)
		}
	}
	return loopResult{p50: percentile(lat, 0.5), paced: paced, converged: converged, rate: rate, perParent: perParent}
}

// againstBaseline says how rate compares with the client-go baseline's,
// when this process measured one.
func againstBaseline(rate, baselineRate float64) string {
	if baselineRate == 0 {
		return "no client-go baseline in this run"
	}
	return fmt.Sprintf("%.3f× the client-go baseline's %.0f objects/s", rate/baselineRate, baselineRate)
}

// waitIdle waits until hook has had no call for quiet, or for at most
// limit, and returns how long it waited.
func waitIdle(hook *hookStats, quiet, limit time.Duration) time.Duration {
	start := time.Now()
	last, lastChange := hook.calls.Load(), time.Now()
	for time.Since(start) < limit {
		time.Sleep(100 * time.Millisecond)
		if n := hook.calls.Load(); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= quiet {
			break
		}
	}
	return time.Since(start)
}

// runPaced creates loop.paced more parents, one every 1/loop.paced-rate
// seconds, among the parents converged, and reports the latency of these
// alone: what a new parent waits when the loop is not behind a burst, which
// should not grow with the number of parents it already handles.
func runPaced(ctx context.Context, b *testing.B, w *watcher, controller string, l layout, converged int) time.Duration {
	n := *loopPaced
	interval := time.Duration(float64(time.Second) / *loopPacedRate)
	keys := make([]string, 0, n)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; i < n; i++ {
		p := newParent(l.namespace(0), fmt.Sprintf("paced%d", i), controller, *loopChildren)
		key := p.GetNamespace() + "/" + p.GetName()
		w.mu.Lock()
		w.created[key] = time.Now()
		w.mu.Unlock()
		if _, err := env.dyn.Resource(hellosGVR).Namespace(p.GetNamespace()).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, key)
		<-tick.C
	}
	deadline := time.Now().Add(*loopTimeout)
	var lat []time.Duration
	for {
		lat = w.latenciesOf(keys)
		if len(lat) == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(lat) < n {
		b.Logf("loop: only %d of %d paced parents converged", len(lat), n)
		return 0
	}
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "paced-p50-ms")
	b.ReportMetric(ms(p99), "paced-p99-ms")
	b.Logf("loop: %d parents created %.0f a second among %d converged ones: parent creation to status p50 %.0f ms, p99 %.0f ms", n, *loopPacedRate, converged, ms(p50), ms(p99))
	return p50
}

// cpuUse is the CPU time each process of the stack, and this benchmark's
// own (its clients, watches and Go hook), has used so far; 0 for one that
// can't be read.
type cpuUse struct {
	apiserver, etcd, kcm, composite, bench float64
	// at is when it was read: CPU-seconds over the wall-clock seconds
	// since are the cores the phase kept busy.
	at time.Time
}

// cpuNow reads every process's CPU time: the machine's two cores are
// shared by all of them, so a client's throughput is bounded by the CPU
// all of them spend per object, not kube-apiserver's alone.
func cpuNow(b *testing.B) cpuUse {
	read := func(name string, f func() (float64, error)) float64 {
		cpu, err := f()
		if err != nil {
			b.Logf("can't read %s's CPU time: %v", name, err)
			return 0
		}
		return cpu
	}
	var self syscall.Rusage
	var bench float64
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err == nil {
		bench = float64(self.Utime.Nano()+self.Stime.Nano()) / 1e9
	}
	return cpuUse{
		apiserver: read("kube-apiserver", suite.KubeAPIServerCPUSeconds),
		etcd:      read("etcd", suite.EtcdCPUSeconds),
		kcm:       read("kube-controller-manager", suite.ControllerManagerCPUSeconds),
		composite: read("composite-apiserver", suite.CompositeCPUSeconds),
		bench:     bench,
		at:        time.Now(),
	}
}

// reportCPU reports the CPU each process spent per object since before,
// and their sum: where a client's requests cost the shared machine.
// kube-apiserver's is apiserver-cpu-ms/object; composite-apiserver's
// includes its idle controllers' and the benchmark's includes its hook,
// its watches and, in the baseline, its client.
func reportCPU(b *testing.B, before cpuUse, objects int) {
	after := cpuNow(b)
	if objects == 0 {
		return
	}
	per := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return 0
		}
		return (b - a) * 1000 / float64(objects)
	}
	apiserver, etcd, kcm := per(before.apiserver, after.apiserver), per(before.etcd, after.etcd), per(before.kcm, after.kcm)
	composite, bench := per(before.composite, after.composite), per(before.bench, after.bench)
	if apiserver > 0 {
		b.ReportMetric(apiserver, "apiserver-cpu-ms/object")
	}
	// The same in CPU-seconds of the whole phase, what each process spent
	// on it: per object hides that the loop's phase and a baseline's write
	// different numbers of objects when the loop did not converge.
	secs := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return 0
		}
		return b - a
	}
	b.ReportMetric(secs(before.apiserver, after.apiserver), "apiserver-cpu-s")
	b.ReportMetric(secs(before.etcd, after.etcd), "etcd-cpu-s")
	b.ReportMetric(secs(before.kcm, after.kcm), "kcm-cpu-s")
	b.ReportMetric(secs(before.composite, after.composite), "composite-cpu-s")
	b.ReportMetric(secs(before.bench, after.bench), "bench-cpu-s")
	b.ReportMetric(etcd, "etcd-cpu-ms/object")
	b.ReportMetric(kcm, "kcm-cpu-ms/object")
	b.ReportMetric(composite, "composite-cpu-ms/object")
	b.ReportMetric(bench, "bench-cpu-ms/object")
	b.ReportMetric(apiserver+etcd+kcm+composite+bench, "total-cpu-ms/object")
	// Whether the phase was bound by the machine's CPU (cores-busy near
	// its core count: its rate follows the CPU it spends per object) or
	// by latency (its requests waited on etcd's disk or on each other).
	total := secs(before.apiserver, after.apiserver) + secs(before.etcd, after.etcd) + secs(before.kcm, after.kcm) +
		secs(before.composite, after.composite) + secs(before.bench, after.bench)
	cores := total / after.at.Sub(before.at).Seconds()
	b.ReportMetric(cores, "cores-busy")
	b.Logf("CPU per object: kube-apiserver %.2f ms, etcd %.2f, kube-controller-manager %.2f, composite-apiserver %.2f, benchmark (clients, watches, hook) %.2f; total %.2f, %.2f of the machine's %d cores busy",
		apiserver, etcd, kcm, composite, bench, apiserver+etcd+kcm+composite+bench, cores, runtime.NumCPU())
}

// profileAPIServer writes kube-apiserver's CPU profile of
// loop.cpuprofile-seconds, from loop.cpuprofile-after on, to file: where
// the shared apiserver spends its CPU on the loop's requests against the
// baseline's.
func profileAPIServer(ctx context.Context, b *testing.B, file string) {
	time.Sleep(*loopProfileAfter)
	data, err := env.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(*loopProfileSeconds)).DoRaw(ctx)
	if err == nil {
		err = os.WriteFile(file, data, 0o644)
	}
	if err != nil {
		b.Logf("no kube-apiserver CPU profile: %v", err)
	}
}

// BenchmarkLoopConvergenceWithIdentity is B2 at the first size of
// loop.parents with and without a per-controller identity, alternately,
// in the same run: what acting as a ServiceAccount (impersonating
// clients, and the access reviews of what reaches the hook) costs the
// loop. It reports the identity's objects/s as a ratio of the plain loop's.
func BenchmarkLoopConvergenceWithIdentity(b *testing.B) {
	setUp(b)
	parents := loopParents[0]
	var plain, identity []float64
	for round := 0; round < *identityRounds; round++ {
		for _, as := range []bool{false, true} {
			name := fmt.Sprintf("parents=%d/round=%d/plain", parents, round)
			if as {
				name = fmt.Sprintf("parents=%d/round=%d/identity", parents, round)
			}
			b.Run(name, func(b *testing.B) {
				r := runLoop(b, parents, 0, loopOptions{identity: as})
				converged, rate := r.converged, r.rate
				if !converged {
					return
				}
				if !as {
					plain = append(plain, rate)
					return
				}
				identity = append(identity, rate)
				if round == *identityRounds-1 && len(plain) > 0 {
					// The last run reports the whole run's ratio: a
					// benchmark with sub-benchmarks prints no line of its
					// own.
					ratio := mean(identity) / mean(plain)
					b.ReportMetric(ratio, "identity-vs-plain")
					b.Logf("loop: with an identity %.0f objects/s, without %.0f (means of %d rounds): %.2f×", mean(identity), mean(plain), len(plain), ratio)
				}
			})
		}
	}
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// identityRBAC is a ServiceAccount name in namespace ns, allowed what a
// benchmark controller's loop does there, and the server's right to
// impersonate it.
func identityRBAC(ns, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[2]s, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[2]s, namespace: %[1]s}
%[3]s- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["impersonate", "get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[2]s, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[2]s}
subjects:
- {kind: ServiceAccount, name: %[2]s, namespace: %[1]s}
- {kind: ServiceAccount, name: composite-apiserver, namespace: composite-system}
`, ns, name, framework.HelloLoopRules)
}

// converge creates parents × children through the controller name, with
// workers creating, and waits up to timeout for the loop to converge them;
// a failure names timeoutFlag, the flag that sets timeout, if there is one.
func (w *watcher) converge(ctx context.Context, b *testing.B, name string, l layout, parents, children, workers int, timeout time.Duration, timeoutFlag string) {
	b.Helper()
	if err := w.createParents(ctx, name, l, parents, children, workers); err != nil {
		b.Fatal(err)
	}
	if err := w.waitConverged(ctx, parents, children, timeout); err != nil {
		if timeoutFlag != "" {
			b.Fatalf("%v (-%s)", err, timeoutFlag)
		}
		b.Fatal(err)
	}
}
