package rolloutdriver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// The model test drives the real driver and step function through random
// sequences of events: ticks, syncs, restarts on an empty or partial view,
// informers listing, status writes failing, parents created, deleted,
// changed and paused by annotation, the rollout paused, resumed (with the
// client's clock skewed), its steps cut, a third revision, the hook good,
// dropping children, failing or throttling. It fakes only the clock, the
// informers' stores, the status writer and the syncs. After every event it
// checks what makes a rollout at least as safe as none (see check).
//
// A failure prints the sequence's seed and its last events; replay one with
// -rollout.seed. CI runs a short run; -rollout.sequences=20000 a long one.

var (
	modelSequences = flag.Int("rollout.sequences", 400, "random event sequences the rollout model test runs")
	modelEvents    = flag.Int("rollout.events", 250, "events per sequence")
	modelSeed      = flag.Int64("rollout.seed", 0, "run only the sequence of this seed")
	modelRandom    = flag.Bool("rollout.random", false, "run sequences of new random seeds, not the fixed ones")
)

func TestRolloutModel(t *testing.T) {
	if *modelSeed != 0 {
		runSequence(t, *modelSeed)
		return
	}
	// CI runs a fixed set of sequences (-rollout.random for new ones), so
	// that a red CI is a change's doing; long runs of new seeds find more.
	base := int64(1)
	if *modelRandom {
		base = time.Now().UnixNano()
	}
	for i := 0; i < *modelSequences && !t.Failed(); i++ {
		runSequence(t, base+int64(i))
	}
}

// behaviour is what a revision's hook does when it syncs a parent.
type behaviour int

const (
	good     behaviour = iota
	drop               // answers, but drops the children: the parent is not Ready
	failing            // the hook call fails
	throttle           // 429 with Retry-After
)

func (b behaviour) String() string { return [...]string{"good", "drop", "failing", "throttle"}[b] }

// world is the cluster as the model knows it (truth) and as the
// informers' caches show it (cache).
type world struct {
	truth  []*unstructured.Unstructured
	cache  map[types.UID]*unstructured.Unstructured
	order  []types.UID
	synced bool
	// visible is how many cached parents a view that has not listed
	// shows.
	visible int
	rv      int64
	// lastRevision is the revision whose hook last synced each parent,
	// healthy whether that sync left it healthy.
	lastRevision map[types.UID]int64
	healthy      map[types.UID]bool
}

func (w *world) view() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, uid := range w.order {
		if p, ok := w.cache[uid]; ok {
			out = append(out, p)
		}
	}
	if !w.synced && len(out) > w.visible {
		out = out[:w.visible]
	}
	return out
}

func (w *world) nextRV() string {
	w.rv++
	return strconv.FormatInt(w.rv, 10)
}

// fakeLoop is a revision's loop: which parents it runs, and what the
// driver queued in it.
type fakeLoop struct {
	w        *world
	rev      atomic.Pointer[parentloop.Revision]
	enqueued map[string]bool
}

func (l *fakeLoop) SetRevision(r parentloop.Revision)     { l.rev.Store(&r) }
func (l *fakeLoop) Parents() []*unstructured.Unstructured { return l.w.view() }
func (l *fakeLoop) HasSynced() bool                       { return l.w.synced }
func (l *fakeLoop) Start(context.Context)                 {}
func (l *fakeLoop) Stop()                                 {}
func (l *fakeLoop) EnqueueWhere(in func(string) bool) {
	for _, p := range l.w.view() {
		if k, _ := cache.MetaNamespaceKeyFunc(p); in(k) {
			l.enqueued[k] = true
		}
	}
}
func (l *fakeLoop) runs(p metav1.Object) bool {
	r := l.rev.Load()
	return r == nil || r.Runs(p)
}

// model is one random sequence.
type model struct {
	t      *testing.T
	seed   int64
	rng    *rand.Rand
	w      *world
	clock  *clocktesting.FakePassiveClock
	spec   v1alpha1.ControllerRollout
	stored *v1alpha1.RolloutStatus
	// revision is the update revision, hook each revision's behaviour.
	revision  int64
	hook      map[int64]behaviour
	resumedAt time.Time
	failWrite bool
	d         *Driver
	update    *fakeLoop
	previous  *fakeLoop
	finished  bool
	trace     []string

	// What the checks remember: per update revision, the step begun last
	// and the highest step passed since; whether the rollout is rolled
	// back; and, during a tick, the plan and view it began with.
	begun      map[int64]int32
	passed     map[int64]int32
	rolledBack bool
	inTick     bool
	tickPlan   *rollout.Plan
	tickSynced bool
	tickStatus v1alpha1.RolloutStatus
}

type fakeController struct{ m *model }

func (c fakeController) Stored() *v1alpha1.RolloutStatus { return c.m.stored.DeepCopy() }
func (c fakeController) Fresh(context.Context) (*v1alpha1.RolloutStatus, error) {
	return c.m.stored.DeepCopy(), nil
}
func (c fakeController) WriteRollout(_ context.Context, change func(*v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error)) error {
	if c.m.failWrite {
		return errors.New("the object has been modified; please apply your changes to the latest version and try again")
	}
	next, err := change(c.m.stored.DeepCopy())
	if err != nil {
		return err
	}
	c.m.stored = next
	return nil
}
func (c fakeController) Event(_, reason, message string) { c.m.event(reason, message) }
func (c fakeController) Done()                           {}
func (c fakeController) Panicked(err error) {
	c.m.fail("the driver panicked: %v\n%s", err, err.(*parentloop.PanicError).Stack)
}

func runSequence(t *testing.T, seed int64) {
	m := &model{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)),
		w:     &world{cache: map[types.UID]*unstructured.Unstructured{}, lastRevision: map[types.UID]int64{}, healthy: map[types.UID]bool{}},
		hook:  map[int64]behaviour{1: good},
		begun: map[int64]int32{}, passed: map[int64]int32{}}
	for i := 0; i < 5+m.rng.Intn(40); i++ {
		m.createParent()
	}
	m.w.synced = true
	for _, p := range m.w.truth {
		m.syncWith(p, 1)
	}
	m.spec = randomRollout(m.rng)
	m.revision = 2
	m.hook[2] = behaviour(m.rng.Intn(4))
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: int32(len(m.spec.Steps)), Phase: v1alpha1.RolloutProgressing, Reason: "RolloutBegun"}
	m.begun[2], m.passed[2] = -1, -1
	m.newDriver(m.rng.Intn(2) == 0)
	m.logf("seed %d: %d parents, rollout %s, revision 2's hook %s", seed, len(m.w.truth), describe(m.spec), m.hook[2])
	for i := 0; i < *modelEvents && !m.finished && !t.Failed(); i++ {
		m.step()
		m.check()
	}
}

func randomRollout(rng *rand.Rand) v1alpha1.ControllerRollout {
	var spec v1alpha1.ControllerRollout
	percent := int32(0)
	for i := 0; i < 1+rng.Intn(4); i++ {
		var s v1alpha1.RolloutStep
		switch rng.Intn(3) {
		case 0:
			percent = min(100, percent+1+int32(rng.Intn(60)))
			s.Percent = ptr.To(percent)
		case 1:
			s.MaxParents = ptr.To(int32(1 + rng.Intn(5)))
		default:
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}
		if rng.Intn(2) == 0 {
			s.PauseSeconds = ptr.To(int32(rng.Intn(30)))
		}
		spec.Steps = append(spec.Steps, s)
	}
	spec.Health = &v1alpha1.RolloutHealth{DeadlineSeconds: ptr.To(int32(30 + rng.Intn(300)))}
	if rng.Intn(3) == 0 {
		spec.Health.Condition = ptr.To(`parent.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`)
	}
	if rng.Intn(2) == 0 {
		spec.OnFailure = ptr.To(v1alpha1.RolloutRollback)
	}
	if rng.Intn(3) == 0 {
		spec.ErrorBudget = &v1alpha1.RolloutErrorBudget{MaxSyncFailures: ptr.To(int32(rng.Intn(3)))}
	}
	return spec
}

func describe(spec v1alpha1.ControllerRollout) string {
	var parts []string
	for _, s := range spec.Steps {
		switch {
		case s.Percent != nil:
			parts = append(parts, fmt.Sprintf("%d%%", *s.Percent))
		case s.MaxParents != nil:
			parts = append(parts, fmt.Sprintf("max %d", *s.MaxParents))
		default:
			parts = append(parts, "canary")
		}
	}
	return fmt.Sprintf("[%s] onFailure %v", strings.Join(parts, ", "), ptr.Deref(spec.OnFailure, v1alpha1.RolloutPause))
}

// newDriver starts the driver anew from the stored status, as a restart,
// a failover or a new revision does; fresh, its informers have not listed
// and show a part of the parents, or none.
func (m *model) newDriver(fresh bool) {
	if fresh {
		m.w.synced = false
		m.w.visible = m.rng.Intn(len(m.w.cache) + 1)
	}
	m.update = &fakeLoop{w: m.w, enqueued: map[string]bool{}}
	m.previous = &fakeLoop{w: m.w, enqueued: map[string]bool{}}
	d, err := New(Config{Key: "hello", Spec: m.spec.DeepCopy(), Status: m.stored.DeepCopy(), ResumedAt: m.resumedAt,
		Update: m.update, Previous: m.previous, Controller: fakeController{m}, Clock: m.clock})
	if err != nil {
		m.fail("can't make the driver: %v", err)
	}
	m.d = d
}

func (m *model) logf(format string, args ...interface{}) {
	m.trace = append(m.trace, fmt.Sprintf(format, args...))
}

func (m *model) fail(format string, args ...interface{}) {
	m.t.Helper()
	last := m.trace[max(0, len(m.trace)-40):]
	m.t.Fatalf("seed %d (replay: go test ./internal/controller/rolloutdriver -run TestRolloutModel -rollout.seed=%d): %s\nstored status: %+v\nlast events:\n  %s",
		m.seed, m.seed, fmt.Sprintf(format, args...), m.stored, strings.Join(last, "\n  "))
}

// step is one random event.
func (m *model) step() {
	switch n := m.rng.Intn(100); {
	case n < 30:
		m.tick(2 * time.Second)
	case n < 55:
		m.syncSome()
	case n < 60:
		m.echo()
	case n < 63:
		m.tick(time.Duration(m.rng.Intn(600)) * time.Second)
	case n < 66:
		m.logf("restart")
		m.newDriver(true)
	case n < 74:
		if !m.w.synced {
			m.logf("informers listed")
			m.w.synced = true
		}
	case n < 77:
		m.failWrite = !m.failWrite
		m.logf("status writes fail: %v", m.failWrite)
	case n < 81:
		m.createParent()
	case n < 83:
		m.deleteParent()
	case n < 86:
		m.pauseParent()
	case n < 88:
		m.changeParent()
	default:
		m.editController()
	}
}

// editController is an edit of the controller an operator or author makes.
func (m *model) editController() {
	switch n := m.rng.Intn(12); {
	case n < 3:
		m.spec.Paused = !m.spec.Paused
		m.logf("spec.rollout.paused: %v", m.spec.Paused)
	case n < 6:
		skew := time.Duration(m.rng.Intn(61)-30) * time.Second
		m.resumedAt = m.clock.Now().Add(skew)
		m.logf("kubectl composite rollout resume, the client's clock %v off", skew)
	case n < 8:
		keep := 1 + m.rng.Intn(len(m.spec.Steps))
		m.spec.Steps = m.spec.Steps[:keep]
		m.logf("steps cut to %d", keep)
	case n < 10:
		m.hook[m.revision] = behaviour(m.rng.Intn(4))
		m.logf("revision %d's hook now %s", m.revision, m.hook[m.revision])
		return
	case n < 11:
		m.thirdRevision()
		return
	default:
		m.logf("spec.rollout removed")
		m.d.Finish()
		m.finished = true
		for _, p := range m.w.view() {
			if !m.update.runs(p) {
				m.fail("spec.rollout removed, and %s is not run by the update revision", p.GetName())
			}
		}
		return
	}
	if err := m.d.Follow(m.spec.DeepCopy(), m.resumedAt); err != nil {
		m.fail("follow: %v", err)
	}
}

// thirdRevision is a new spec mid-rollout: the loops restart, and the
// rollout begins anew over the revision the parents not moved run.
func (m *model) thirdRevision() {
	current := m.stored.CurrentRevision
	if m.stored.Phase == v1alpha1.RolloutComplete {
		current = m.stored.UpdateRevision
	}
	m.revision++
	m.hook[m.revision] = behaviour(m.rng.Intn(4))
	m.spec = randomRollout(m.rng)
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: current, UpdateRevision: m.revision, Steps: int32(len(m.spec.Steps)),
		Phase: v1alpha1.RolloutProgressing, Reason: "RolloutBegun"}
	m.begun[m.revision], m.passed[m.revision] = -1, -1
	m.rolledBack = false
	m.logf("revision %d over revision %d, rollout %s, its hook %s", m.revision, current, describe(m.spec), m.hook[m.revision])
	m.newDriver(m.rng.Intn(2) == 0)
}

func (m *model) tick(d time.Duration) {
	m.clock.SetTime(m.clock.Now().Add(d))
	m.inTick, m.tickPlan, m.tickSynced, m.tickStatus = true, m.d.plan.Load(), m.w.synced, *m.stored.DeepCopy()
	m.d.tick(context.Background())
	m.inTick = false
	m.logf("tick +%v: %s step %d/%d %s %q bucketLimit %d", d, m.stored.Phase, m.stored.Step, m.stored.Steps, m.stored.Reason, m.stored.Message, m.stored.BucketLimit)
}

// syncSome syncs a few parents, those the driver queued first.
func (m *model) syncSome() {
	view := m.w.view()
	for i := 0; i < 1+m.rng.Intn(5) && len(view) > 0; i++ {
		m.sync(view[m.rng.Intn(len(view))])
	}
	for _, l := range []*fakeLoop{m.update, m.previous} {
		for k := range l.enqueued {
			delete(l.enqueued, k)
			for _, p := range view {
				if pk, _ := cache.MetaNamespaceKeyFunc(p); pk == k {
					m.sync(p)
				}
			}
		}
	}
}

// sync is a loop's sync of a cached parent: the loop whose revision runs
// it calls that revision's hook and writes the parent's status.
func (m *model) sync(p *unstructured.Unstructured) {
	if pausedParent(p) || m.finished {
		return
	}
	up, prev := m.update.runs(p), m.previous.runs(p)
	if up == prev {
		m.fail("parent %s is run by both revisions or neither (update %v, previous %v)", p.GetName(), up, prev)
	}
	revision := m.stored.CurrentRevision
	if up {
		revision = m.revision
	}
	truth := m.truthOf(p.GetUID())
	if truth == nil {
		return
	}
	written := m.syncWith(truth, revision)
	if !up {
		return
	}
	out := parentloop.SyncOutcome{Written: written}
	switch m.hook[revision] {
	case failing:
		out = parentloop.SyncOutcome{Err: errors.New("hook answered 500")}
	case throttle:
		out = parentloop.SyncOutcome{Err: &hooks.TooManyRequestsError{RetryAfter: time.Second}}
	}
	rev := m.update.rev.Load()
	rev.Synced(p, out)
	if m.rng.Intn(2) == 0 {
		m.echo()
	}
}

// syncWith is revision's hook's sync of the parent in truth: it writes
// the parent's Ready as its hook leaves it, and returns the
// resourceVersion written ("" when the hook failed).
func (m *model) syncWith(p *unstructured.Unstructured, revision int64) string {
	b := m.hook[revision]
	if b == failing || b == throttle {
		return ""
	}
	ready := "True"
	if b == drop {
		ready = "False"
	}
	_ = unstructured.SetNestedSlice(p.Object, []interface{}{map[string]interface{}{"type": "Ready", "status": ready}}, "status", "conditions")
	rv := m.w.nextRV()
	p.SetResourceVersion(rv)
	m.w.lastRevision[p.GetUID()] = revision
	m.w.healthy[p.GetUID()] = b == good
	if _, ok := m.w.cache[p.GetUID()]; !ok || m.w.synced && m.rng.Intn(3) == 0 {
		m.w.cache[p.GetUID()] = p.DeepCopy()
	}
	return rv
}

// echo brings the caches up to date with the truth.
func (m *model) echo() {
	for _, p := range m.w.truth {
		m.w.cache[p.GetUID()] = p.DeepCopy()
	}
}

func (m *model) truthOf(uid types.UID) *unstructured.Unstructured {
	for _, p := range m.w.truth {
		if p.GetUID() == uid {
			return p
		}
	}
	return nil
}

func (m *model) createParent() {
	n := len(m.w.order)
	p := &unstructured.Unstructured{}
	p.SetNamespace("ns")
	p.SetName(fmt.Sprintf("p%d", n))
	p.SetUID(types.UID(fmt.Sprintf("uid-%d-%d", m.seed, n)))
	p.SetGeneration(1)
	p.SetResourceVersion(m.w.nextRV())
	if m.rng.Intn(5) == 0 {
		p.SetLabels(map[string]string{"canary": "true"})
	}
	m.w.truth = append(m.w.truth, p)
	m.w.order = append(m.w.order, p.GetUID())
	m.w.cache[p.GetUID()] = p.DeepCopy()
	m.logf("%s created, labels %v", p.GetName(), p.GetLabels())
}

func (m *model) deleteParent() {
	if len(m.w.truth) == 0 {
		return
	}
	i := m.rng.Intn(len(m.w.truth))
	p := m.w.truth[i]
	m.w.truth = append(m.w.truth[:i], m.w.truth[i+1:]...)
	delete(m.w.cache, p.GetUID())
	m.logf("%s deleted", p.GetName())
}

func (m *model) pauseParent() {
	if len(m.w.truth) == 0 {
		return
	}
	p := m.w.truth[m.rng.Intn(len(m.w.truth))]
	paused := !pausedParent(p)
	p.SetAnnotations(map[string]string{v1alpha1.ParentPausedAnnotation: strconv.FormatBool(paused)})
	p.SetResourceVersion(m.w.nextRV())
	m.w.cache[p.GetUID()] = p.DeepCopy()
	m.logf("%s paused by annotation: %v", p.GetName(), paused)
}

func (m *model) changeParent() {
	if len(m.w.truth) == 0 {
		return
	}
	p := m.w.truth[m.rng.Intn(len(m.w.truth))]
	p.SetGeneration(p.GetGeneration() + 1)
	p.SetResourceVersion(m.w.nextRV())
	m.w.healthy[p.GetUID()] = false
	m.w.cache[p.GetUID()] = p.DeepCopy()
}

var stepOf = regexp.MustCompile(`step (\d+) of \d+`)

// event checks each decision as its Event announces it.
func (m *model) event(reason, message string) {
	m.logf("Event %s: %s", reason, message)
	step := int32(-1)
	if s := stepOf.FindStringSubmatch(message); s != nil {
		n, _ := strconv.Atoi(s[1])
		step = int32(n - 1)
	}
	switch reason {
	case "RolloutStepBegun":
		m.checkBegun(step)
	case "RolloutStepPassed":
		m.checkPassed(step)
	case "RolloutRolledBack":
		m.rolledBack = true
	case "RolloutResumed":
		m.rolledBack = false
	}
}

// checkBegun: a step begins only on a synced view, after the step before
// it passed, and moves no more parents than its share of the parents
// waiting.
func (m *model) checkBegun(step int32) {
	if !m.inTick || !m.tickSynced {
		m.fail("step %d began on a view that had not listed", step+1)
	}
	if step > 0 && m.passed[m.revision] < step-1 {
		m.fail("step %d began before step %d passed (passed so far: %d)", step+1, step, m.passed[m.revision]+1)
	}
	var waiting []metav1.Object
	for _, p := range m.w.view() {
		if !m.tickPlan.Updated(p) {
			waiting = append(waiting, p)
		}
	}
	if limit := rollout.LimitOf(m.spec.Steps[step], m.tickStatus.BucketLimit, waiting); m.stored.BucketLimit > limit {
		m.fail("step %d moved parents below bucket %d, its share is below %d", step+1, m.stored.BucketLimit, limit)
	}
	m.begun[m.revision] = step
}

// checkPassed: a step passes only once it began, on a synced view, with
// every parent it moved (but those paused) synced by the update revision
// and healthy.
func (m *model) checkPassed(step int32) {
	if !m.inTick || !m.tickSynced {
		m.fail("step %d passed on a view that had not listed", step+1)
	}
	if m.begun[m.revision] != step {
		m.fail("step %d passed, but the step begun last is %d", step+1, m.begun[m.revision]+1)
	}
	for _, p := range m.w.view() {
		if !m.tickPlan.Updated(p) || pausedParent(p) {
			continue
		}
		if uid := p.GetUID(); m.w.lastRevision[uid] != m.revision || !m.w.healthy[uid] {
			m.fail("step %d passed, but %s, which it moved, was last synced by revision %d, healthy %v", step+1, p.GetName(), m.w.lastRevision[uid], m.w.healthy[uid])
		}
	}
	m.passed[m.revision] = max(m.passed[m.revision], step)
}

// check holds after every event: no parent is run by both revisions or
// neither; after a rollback, no parent runs the update revision in the
// loop, nor in a live /sync or the fleet preview (rollout.NewPlan of the
// stored status).
func (m *model) check() {
	if m.finished {
		return
	}
	stored, err := rollout.NewPlan(m.spec.Steps, m.stored)
	if err != nil {
		m.fail("the stored status has no plan: %v", err)
	}
	for _, p := range m.w.view() {
		up, prev := m.update.runs(p), m.previous.runs(p)
		if up == prev {
			m.fail("parent %s is run by both revisions or neither", p.GetName())
		}
		if m.rolledBack && (up || stored.Updated(p)) {
			m.fail("rolled back, and %s runs the update revision (loop %v, /sync %v)", p.GetName(), up, stored.Updated(p))
		}
	}
}
