package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// The dry-run comparison's cost (issue 61 item 6, R12): when the local
// merge says a child changed, the loop may ask kube-apiserver with a dry
// run of the apply. B2 and B10 count those requests in kube-apiserver's
// own apiserver_request_total, per parent sync (composite-apiserver's
// composite_controller_syncs_total), while their parents converge, while
// a periodic resync goes over them converged, and, with a child update
// method given, while a change of the hook's answer reaches every child.
var (
	loopChildUpdate = flag.String("loop.child-update", "", "BenchmarkLoopConvergence: the children's updateStrategy.method (OnDelete, Recreate or InPlace); empty keeps InPlace and measures no change. Given, the \"loop\" variant, once converged and resynced, changes its hook's answer for every child (a new data value) and reports the dry-run applies per child until the loop is quiet")
	loopDryRunCost  = flag.Bool("loop.dry-run-resync", true, "BenchmarkLoopConvergence: the \"loop\" variant, once converged, sets spec.resyncPeriodSeconds and reports kube-apiserver's dry-run applies per parent sync during the periodic resync of its converged parents (0 is the target)")
	podChildUpdate  = flag.String("pods.child-update", "", "BenchmarkPodChildren: the Pods' updateStrategy.method (OnDelete or Recreate: a Pod's spec can't be updated in place); empty keeps InPlace and measures no change. Given, the loop, once its Pods are Ready and resynced, changes its hook's answer for every Pod (a new annotation) and reports the dry-run applies per Pod until the loop is quiet")
)

// childUpdateMethods are the methods the flags above take.
var childUpdateMethods = map[string]bool{"": true, "OnDelete": true, "Recreate": true, "InPlace": true}

// revisionAnnotation is the annotation B10's changed hook puts on every
// Pod; B2's names its revision in the ConfigMaps' data (revisionHook).
const revisionAnnotation = "bench.example.com/revision"

// dryRunCount is what kube-apiserver and composite-apiserver had served of
// one controller at one moment.
type dryRunCount struct {
	controller     string
	dryRuns, syncs float64
	// byResult are the syncs by result (success, error, throttled): a
	// phase that syncs far more than its parents shows why.
	byResult map[string]float64
}

// countDryRuns reads the dry-run applies kube-apiserver has served (every
// resource, every client: the loop is the only one that dry-runs here) and
// the syncs composite-apiserver has made of controller's parents.
func countDryRuns(ctx context.Context, controller string) (dryRunCount, error) {
	dryRuns, err := dryRunApplies(ctx)
	if err != nil {
		return dryRunCount{}, err
	}
	byResult, err := syncsOf(ctx, controller)
	if err != nil {
		return dryRunCount{}, err
	}
	var syncs float64
	for _, n := range byResult {
		syncs += n
	}
	return dryRunCount{controller: controller, dryRuns: dryRuns, syncs: syncs, byResult: byResult}, nil
}

// since are the dry-run applies and syncs from c until now, and the syncs
// by result.
func (c dryRunCount) since(ctx context.Context) (dryRuns, syncs float64, byResult map[string]float64, err error) {
	now, err := countDryRuns(ctx, c.controller)
	if err != nil {
		return 0, 0, nil, err
	}
	byResult, _ = diffCounts(c.byResult, now.byResult)
	return now.dryRuns - c.dryRuns, now.syncs - c.syncs, byResult, nil
}

// report reports the dry-run applies and syncs since c as <phase>-dry-runs,
// <phase>-syncs and <phase>-dry-runs-per-sync.
func (c dryRunCount) report(ctx context.Context, b *testing.B, phase string) (dryRuns, syncs float64) {
	dryRuns, syncs, byResult, err := c.since(ctx)
	if err != nil {
		b.Logf("%s: no count of dry-run applies: %v", phase, err)
		return 0, 0
	}
	b.ReportMetric(dryRuns, phase+"-dry-runs")
	b.ReportMetric(syncs, phase+"-syncs")
	b.ReportMetric(perSync(dryRuns, syncs), phase+"-dry-runs-per-sync")
	b.Logf("%s: %g dry-run applies in %g parent syncs of %s (%.3f per sync); syncs by result: %s", phase, dryRuns, syncs, c.controller, perSync(dryRuns, syncs), formatCounts(byResult))
	return dryRuns, syncs
}

func perSync(dryRuns, syncs float64) float64 {
	if syncs == 0 {
		return 0
	}
	return dryRuns / syncs
}

// dryRunApplies sums kube-apiserver's apiserver_request_total of dry-run
// applies: dry_run="All", verb APPLY (a server-side apply's PATCH, as
// kube-apiserver labels it) or PATCH, over every resource.
func dryRunApplies(ctx context.Context) (float64, error) {
	data, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("can't read kube-apiserver's /metrics: %w", err)
	}
	return sumSamples(data, "apiserver_request_total", isDryRunApply)
}

// isDryRunApply tells whether a sample of apiserver_request_total counts
// dry-run applies.
func isDryRunApply(labels map[string]string) bool {
	return labels["dry_run"] == "All" && (labels["verb"] == "APPLY" || labels["verb"] == "PATCH")
}

// syncsOf reads composite-apiserver's composite_controller_syncs_total of
// controller by result.
func syncsOf(ctx context.Context, controller string) (map[string]float64, error) {
	data, err := serverGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, result := range []string{"success", "error", "throttled"} {
		n, err := sumSamples(data, "composite_controller_syncs_total", func(labels map[string]string) bool {
			return labels["controller"] == controller && labels["result"] == result
		})
		if err != nil {
			return nil, err
		}
		out[result] = n
	}
	return out, nil
}

// sumSamples sums the samples of metric in the Prometheus text data whose
// labels match says.
func sumSamples(data []byte, metric string, match func(map[string]string) bool) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		labels, value, err := parseSample(line[len(metric):])
		if err != nil {
			return 0, fmt.Errorf("can't parse %q: %w", line, err)
		}
		if match(labels) {
			sum += value
		}
	}
	return sum, sc.Err()
}

// patchController merge-patches the CompositeController name with patch
// (a map marshalled to JSON): no resourceVersion precondition, so the
// loop's status writes can't make it conflict.
func patchController(ctx context.Context, name string, patch map[string]interface{}) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("can't patch CompositeController %s: %w", name, err)
	}
	if _, err := env.cc.MetacontrollerV1alpha1().CompositeControllers().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("can't patch CompositeController %s: %w", name, err)
	}
	return nil
}

// resyncPeriod is the spec.resyncPeriodSeconds the resync measurement
// sets: long enough that the sync of every parent which the change of
// the spec starts (a new revision restarts the loop) is over before the
// periodic resync begins, at about 500 parents synced a second.
func resyncPeriod(parents int) time.Duration {
	return 15*time.Second + time.Duration(parents)*5*time.Millisecond
}

// measureResync sets controller's spec.resyncPeriodSeconds over its
// converged parents, lets the sync of every parent that the restarted loop
// makes run out, then counts the dry-run applies of the next periodic
// resync of every parent: a converged child costs none.
func measureResync(ctx context.Context, b *testing.B, controller string, hook *hookStats, parents int) {
	period := resyncPeriod(parents)
	start := time.Now()
	if err := patchController(ctx, controller, map[string]interface{}{"spec": map[string]interface{}{"resyncPeriodSeconds": int64(period / time.Second)}}); err != nil {
		b.Fatal(err)
	}
	hook.reset()
	// The new revision restarts the loop, which syncs every parent as its
	// informer lists them; the periodic resync follows period later.
	if err := waitEveryParent(hook, parents, period); err != nil {
		b.Fatalf("resync: the loop restarted by spec.resyncPeriodSeconds: %v", err)
	}
	waitIdle(hook, time.Second, period)
	restarted, err := countDryRuns(ctx, controller)
	if err != nil {
		b.Fatal(err)
	}
	if since := time.Since(start); since > period {
		b.Logf("resync: the restarted loop's syncs took %.1f s, longer than the resync period %s: the two overlap", since.Seconds(), period)
	}
	hook.reset()
	if err := waitEveryParent(hook, parents, 2*period); err != nil {
		b.Fatalf("resync: the periodic resync: %v", err)
	}
	waitIdle(hook, 2*time.Second, period)
	restarted.report(ctx, b, "resync")
}

// waitEveryParent waits until hook was called for parents parents, at
// most timeout.
func waitEveryParent(hook *hookStats, parents int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for hook.distinct() < parents {
		if time.Now().After(deadline) {
			return fmt.Errorf("the hook was called for %d of %d parents within %s", hook.distinct(), parents, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// childChange is one change of a controller's hook that changes every
// child: the new hook's URL and stats, how many children it changes, and
// how many of them carry the change now.
type childChange struct {
	url      string
	hook     *hookStats
	children int
	changed  func() int
	method   string
}

// measureChange moves controller's sync hook to c.url (one update of
// spec.hooks.sync.webhook.url, as a user's change of the hook is), waits
// until the loop is quiet again (every child changed, unless the method is
// OnDelete, and no hook call for 2 s), and reports the dry-run applies per
// child: 0 under OnDelete, which updates nothing, at most one per child
// changed under the others.
func measureChange(ctx context.Context, b *testing.B, controller string, c childChange, parents int) {
	before, err := countDryRuns(ctx, controller)
	if err != nil {
		b.Fatal(err)
	}
	url := c.url + "/sync"
	start := time.Now()
	if err := patchController(ctx, controller, map[string]interface{}{"spec": map[string]interface{}{"hooks": map[string]interface{}{"sync": map[string]interface{}{"webhook": map[string]interface{}{"url": url}}}}}); err != nil {
		b.Fatal(err)
	}
	if err := waitEveryParent(c.hook, parents, *loopTimeout); err != nil {
		b.Fatalf("change: the changed hook: %v", err)
	}
	for c.method != "OnDelete" && c.changed() < c.children {
		if time.Since(start) > *loopTimeout {
			b.Fatalf("change: %d of %d children changed %s after the change of the hook (%s)", c.changed(), c.children, *loopTimeout, c.method)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitIdle(c.hook, 2*time.Second, 2*time.Minute)
	dryRuns, syncs := before.report(ctx, b, "change")
	changed := c.changed()
	b.ReportMetric(float64(changed), "change-children-changed")
	b.ReportMetric(dryRuns/float64(c.children), "change-dry-runs-per-child")
	b.Logf("change (%s): %d of %d children changed in %.1f s; %g dry-run applies (%.3f per child) in %g syncs",
		c.method, changed, c.children, time.Since(start).Seconds(), dryRuns, dryRuns/float64(c.children), syncs)
	if c.method == "OnDelete" && changed > 0 {
		b.Errorf("change: %d children changed under OnDelete", changed)
	}
}

// measureLoopDryRuns is B2's "loop" variant's resync and change, once its
// parents converged.
func measureLoopDryRuns(ctx context.Context, b *testing.B, controller string, l layout, hook *hookStats, w *watcher) {
	parents := w.parentCount()
	if *loopDryRunCost {
		measureResync(ctx, b, controller, hook, parents)
	}
	if *loopChildUpdate == "" {
		return
	}
	var revs []*childRevisions
	for i := 0; i < l.count(parents); i++ {
		r, err := watchChildRevisions(ctx, l.namespace(i*l.perNamespace))
		if err != nil {
			b.Fatal(err)
		}
		defer r.close()
		revs = append(revs, r)
	}
	url := env.hook.serve(controller+"-v2", revisionHook("v2"))
	measureChange(ctx, b, controller, childChange{
		url: url, hook: env.hook.of(controller + "-v2"), children: parents * *loopChildren, method: *loopChildUpdate,
		changed: func() int {
			n := 0
			for _, r := range revs {
				n += r.count("v2")
			}
			return n
		},
	}, parents)
}

// measurePodDryRuns is B10's resync and change, once its Pods are Ready.
func measurePodDryRuns(ctx context.Context, b *testing.B, controller string, hook *hookStats, pw *podWatcher, parents int) {
	measureResync(ctx, b, controller, hook, parents)
	if *podChildUpdate == "" {
		return
	}
	url := env.hook.serve(controller+"-v2", func(st *hookStats, req *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
		resp := podHookResponse(st, req)
		for _, pod := range resp.Children {
			pod.SetAnnotations(map[string]string{revisionAnnotation: "v2"})
		}
		return resp
	})
	measureChange(ctx, b, controller, childChange{
		url: url, hook: env.hook.of(controller + "-v2"), children: parents * *podsPerParent, method: *podChildUpdate,
		changed: func() int { return pw.annotated(revisionAnnotation, "v2") },
	}, parents)
}

// annotated counts the Pods last seen with annotation key=value.
func (w *podWatcher) annotated(key, value string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, pod := range w.pods {
		if pod.Annotations[key] == value {
			n++
		}
	}
	return n
}

// parentCount is how many parents w saw created, the paced ones included.
func (w *watcher) parentCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.created)
}
