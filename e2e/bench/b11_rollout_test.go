package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var (
	rolloutParents  = flag.Int("rollout.parents", 0, "BenchmarkRollout: converged parents of each of its two controllers; 0 skips B11 (hack/bench.sh runs it with --b11, 2000 parents)")
	rolloutChildren = flag.Int("rollout.children", 3, "BenchmarkRollout: ConfigMaps per parent")
	rolloutTimeout  = flag.Duration("rollout.timeout", 15*time.Minute, "BenchmarkRollout: how long each convergence, and each change of a hook, may take before the benchmark fails")
)

// rolloutBenchmark is B11's name, selected only with -rollout.parents.
const rolloutBenchmark = "BenchmarkRollout"

// rolloutSpec is B11's progressive controller's spec.rollout: four steps
// by share of parents, with the default health gate (a parent without a
// Ready condition is healthy once the new revision synced it) and a
// deadline no step on a loaded machine comes near, so that a step waits
// for its parents rather than pausing.
func rolloutSpec(spec *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
	var steps []*acv1alpha1.RolloutStepApplyConfiguration
	for _, percent := range []int32{25, 50, 75, 100} {
		steps = append(steps, acv1alpha1.RolloutStep().WithPercent(percent))
	}
	spec.WithRollout(acv1alpha1.ControllerRollout().WithSteps(steps...).
		WithHealth(acv1alpha1.RolloutHealth().WithDeadlineSeconds(3600)))
}

// revisionHook is B11's hook at one revision: the benchmarks' children,
// each naming rev in its data, and the same in the parent's status.
func revisionHook(rev string) func(*hookStats, *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
	return func(_ *hookStats, req *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
		resp := hookResponse(req.Parent)
		for _, child := range resp.Children {
			child.Object["data"].(map[string]interface{})["revision"] = rev
		}
		resp.Status["revision"] = rev
		return resp
	}
}

// rolloutSubject is one of B11's controllers: its parents' layout and
// watcher, and its hook at revisions v1 (what it is created with) and v2
// (what the change moves it to).
type rolloutSubject struct {
	name   string
	l      layout
	w      *watcher
	v1, v2 *hookStats
	v2URL  string
	// progressive: created with rolloutSpec.
	progressive bool
}

// startRolloutSubject creates a controller of B11 whose hook answers
// revision v1, with spec.rollout when progressive. Its hook, as B2's
// "loop" variant's, answers from the parent alone and says so
// (ownChildWrites and ownStatusWrites: Ignore).
func startRolloutSubject(ctx context.Context, b *testing.B, base string, progressive bool) *rolloutSubject {
	name := uniqueName(base)
	// Served before startMeasured registers the controller's hook, which
	// then keeps this answer.
	env.hook.serve(name, revisionHook("v1"))
	v2URL := env.hook.serve(name+"-v2", revisionHook("v2"))
	opts := loopOptions{ignoreOwnChildWrites: true, ignoreOwnStatusWrites: true}
	if progressive {
		opts.spec = rolloutSpec
	}
	l, v1, w := startMeasured(ctx, b, name, *rolloutParents, 0, opts)
	return &rolloutSubject{name: name, l: l, w: w, v1: v1, v2: env.hook.of(name + "-v2"), v2URL: v2URL, progressive: progressive}
}

// converge creates the subject's parents at once and returns the time from
// the first creation until every parent's status and child was seen, then
// waits for its hook to be idle.
func (s *rolloutSubject) converge(ctx context.Context, b *testing.B) time.Duration {
	parents, children := *rolloutParents, *rolloutChildren
	start := time.Now()
	s.w.converge(ctx, b, s.name, s.l, parents, children, *loopCreators, *rolloutTimeout, "")
	_, _, last := s.w.progress()
	elapsed := last.Sub(start)
	settled := waitIdle(s.v1, 2*time.Second, 2*time.Minute)
	b.Logf("rollout: %s (spec.rollout set: %t) converged %d parents × %d ConfigMaps in %.1f s: %.0f objects/s; %.2f hook calls per parent once idle (%.1f s later)",
		s.name, s.progressive, parents, children, elapsed.Seconds(), float64(parents*(children+2))/elapsed.Seconds(),
		float64(s.v1.calls.Load())/float64(parents), settled.Seconds())
	return elapsed
}

// changeResult is what one change of a subject's hook took.
type changeResult struct {
	// children: until every child named v2; complete: until
	// status.rollout said Complete for the new revision (progressive only).
	children, complete time.Duration
	// steps are the times each step was first seen passed.
	steps []time.Duration
	// v1Calls and v2Calls are each hook's calls from the change until the
	// new hook was idle.
	v1Calls, v2Calls int64
}

// end is when the change was done: every child on v2 and, for a
// progressive subject, the rollout complete.
func (r changeResult) end() time.Duration { return max(r.children, r.complete) }

// change moves the subject's sync hook to revision v2's URL (one update
// of spec.hooks.sync.webhook.url, as a user's change is) and waits until
// every child names v2 and, with spec.rollout, the rollout of the new
// revision is Complete.
func (s *rolloutSubject) change(ctx context.Context, b *testing.B) changeResult {
	parents, children := *rolloutParents, *rolloutChildren
	revs, err := watchChildRevisions(ctx, s.l.namespace(0))
	if err != nil {
		b.Fatal(err)
	}
	defer revs.close()
	if n := revs.count("v1"); n != parents*children {
		b.Fatalf("rollout: %s: %d of %d children name v1 before the change", s.name, n, parents*children)
	}
	s.v1.reset()
	s.v2.reset()
	cc := env.cc.MetacontrollerV1alpha1().CompositeControllers()
	c, err := cc.Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	url := s.v2URL + "/sync"
	c.Spec.Hooks.Sync.Webhook.URL = &url
	start := time.Now()
	if _, err := cc.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	var r changeResult
	lastStep := int32(0)
	deadline := start.Add(*rolloutTimeout)
	for r.children == 0 || (s.progressive && r.complete == 0) {
		if time.Now().After(deadline) {
			b.Fatalf("rollout: %s: not done %s after the change: %d of %d children name v2; status.rollout %s",
				s.name, *rolloutTimeout, revs.count("v2"), parents*children, s.rolloutStatus(ctx))
		}
		time.Sleep(100 * time.Millisecond)
		if r.children == 0 && revs.count("v2") == parents*children {
			r.children = revs.lastChange().Sub(start)
		}
		if !s.progressive || r.complete != 0 {
			continue
		}
		got, err := cc.Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			b.Logf("rollout: reading %s: %v", s.name, err)
			continue
		}
		st := got.Status.Rollout
		if st == nil || st.UpdateRevision != got.Status.Revision || got.Status.ObservedGeneration != got.Generation {
			continue
		}
		for ; lastStep < st.Step; lastStep++ {
			r.steps = append(r.steps, time.Since(start))
		}
		switch st.Phase {
		case v1alpha1.RolloutComplete:
			r.complete = time.Since(start)
		case v1alpha1.RolloutPaused, v1alpha1.RolloutRolledBack:
			b.Fatalf("rollout: %s: the rollout stopped %.1f s after the change: %s", s.name, time.Since(start).Seconds(), s.rolloutStatus(ctx))
		}
	}
	waitIdle(s.v2, 2*time.Second, 2*time.Minute)
	r.v1Calls, r.v2Calls = s.v1.calls.Load(), s.v2.calls.Load()
	return r
}

// rolloutStatus is the subject's status.rollout, for a failure's message.
func (s *rolloutSubject) rolloutStatus(ctx context.Context) string {
	c, err := env.cc.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v (revision %d)", c.Status.Rollout, c.Status.Revision)
}

// childRevisions follows the controlled ConfigMaps of one namespace
// through an informer and counts them by the revision their data names.
type childRevisions struct {
	mu     sync.Mutex
	rev    map[string]string
	counts map[string]int
	last   time.Time
	stop   chan struct{}
}

func watchChildRevisions(ctx context.Context, namespace string) (*childRevisions, error) {
	c := &childRevisions{rev: map[string]string{}, counts: map[string]int{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().ConfigMaps().Informer()
	set := func(obj interface{}) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && metav1.GetControllerOfNoCopy(cm) != nil {
			c.set(cm.Name, cm.Data["revision"])
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, cur interface{}) { set(cur) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				c.set(cm.Name, "")
			}
		},
	})
	if err != nil {
		return nil, err
	}
	factory.Start(c.stop)
	// The handler's own sync, not the informer's: the counts must hold
	// every child listed before the change is measured.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		c.close()
		return nil, fmt.Errorf("the informer of the ConfigMaps of %s did not sync", namespace)
	}
	return c, nil
}

// set notes that child names rev ("" once deleted).
func (c *childRevisions) set(child, rev string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, known := c.rev[child]
	if known && old == rev {
		return
	}
	if known {
		c.counts[old]--
	}
	if rev == "" {
		delete(c.rev, child)
	} else {
		c.rev[child] = rev
		c.counts[rev]++
	}
	c.last = time.Now()
}

func (c *childRevisions) count(rev string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[rev]
}

// lastChange is when a child last changed revision.
func (c *childRevisions) lastChange() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *childRevisions) close() { close(c.stop) }

// loadAverage is the machine's 1-minute load average, from /proc/loadavg
// ("" when unreadable): B11's figures are from one run on shared cores.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Fields(string(data))[0]
}

// BenchmarkRollout (B11) measures spec.rollout at -rollout.parents
// converged parents × -rollout.children ConfigMaps, with two controllers
// in the same run. First each converges its fresh parents, the one
// without spec.rollout first and then the one created with it (no
// rollout under way; its parents converge beside the first's, a handicap
// if any): the loop's throughput with spec.rollout set against without
// (throughput-with-vs-without, target ≥ 0.9). Then each changes its hook
// to one whose children name v2: the progressive one through its four
// steps (25, 50, 75, 100 percent) until every child names v2 and
// status.rollout is Complete, the other all at once until every child
// names v2. It reports both times, all-at-once-vs-progressive (the first
// over the second: the share of the all-at-once time a progressive
// rollout takes is its inverse) and each change's hook calls per parent.
func BenchmarkRollout(b *testing.B) {
	if *rolloutParents <= 0 {
		b.Skip("-rollout.parents=0")
	}
	setUp(b)
	ctx := context.Background()
	parents := *rolloutParents
	objects := float64(parents * (*rolloutChildren + 2))
	loadBefore := loadAverage()
	plain := startRolloutSubject(ctx, b, "bench-rollout-plain", false)
	withoutRollout := plain.converge(ctx, b)
	progressive := startRolloutSubject(ctx, b, "bench-rollout-steps", true)
	withRollout := progressive.converge(ctx, b)
	throughput := withoutRollout.Seconds() / withRollout.Seconds()

	steps := progressive.change(ctx, b)
	b.Logf("rollout: progressive change of %s: every child on v2 after %.1f s, rollout Complete after %.1f s; steps seen passed at %s; hook calls per parent: %.2f of v2, %.2f of v1 meanwhile",
		progressive.name, steps.children.Seconds(), steps.complete.Seconds(), formatDurations(steps.steps),
		float64(steps.v2Calls)/float64(parents), float64(steps.v1Calls)/float64(parents))
	all := plain.change(ctx, b)
	b.Logf("rollout: all-at-once change of %s: every child on v2 after %.1f s; hook calls per parent: %.2f of v2, %.2f of v1 meanwhile",
		plain.name, all.children.Seconds(), float64(all.v2Calls)/float64(parents), float64(all.v1Calls)/float64(parents))
	ratio := all.end().Seconds() / steps.end().Seconds()
	loadAfter := loadAverage()

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(withoutRollout.Seconds(), "converge-without-s")
	b.ReportMetric(withRollout.Seconds(), "converge-with-s")
	b.ReportMetric(objects/withoutRollout.Seconds(), "objects/s-without")
	b.ReportMetric(objects/withRollout.Seconds(), "objects/s-with")
	b.ReportMetric(throughput, "throughput-with-vs-without")
	b.ReportMetric(steps.end().Seconds(), "progressive-s")
	b.ReportMetric(steps.children.Seconds(), "progressive-children-s")
	b.ReportMetric(all.end().Seconds(), "all-at-once-s")
	b.ReportMetric(ratio, "all-at-once-vs-progressive")
	b.ReportMetric(float64(steps.v2Calls)/float64(parents), "progressive-hook-calls-per-parent")
	b.ReportMetric(float64(steps.v1Calls)/float64(parents), "progressive-old-hook-calls-per-parent")
	b.ReportMetric(float64(all.v2Calls)/float64(parents), "all-at-once-hook-calls-per-parent")
	b.ReportMetric(float64(all.v1Calls)/float64(parents), "all-at-once-old-hook-calls-per-parent")
	b.Logf("rollout: %d parents × %d ConfigMaps: converged in %.1f s with spec.rollout set, %.1f s without: %.2f× the throughput; a change in four steps took %.1f s, all at once %.1f s: %.2f×; load average %s before, %s after",
		parents, *rolloutChildren, withRollout.Seconds(), withoutRollout.Seconds(), throughput,
		steps.end().Seconds(), all.end().Seconds(), ratio, loadBefore, loadAfter)
}

// formatDurations prints durations in seconds, comma-separated.
func formatDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f s", d.Seconds())
	}
	return strings.Join(parts, ", ")
}
