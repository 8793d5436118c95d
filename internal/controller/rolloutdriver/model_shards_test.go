package rolloutdriver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// The model test with --shards: two or three replicas, each with its own
// driver, loops and informers' view, share the parents' shards and the
// one stored status. A parent is synced only by the replica holding its shard, with
// that replica's loops; the holder of DriverKey's shard drives. Events are
// the single-replica model's (model_test.go) plus replicas dying and
// restarting, shards moving between replicas (or to nobody while their
// holder is dead) and the driver's shard moving (a failover). The checks
// after every event are the single-replica model's, over every replica.
//
// A failure prints the seed; replay it with -rollout.shards.seed.
// -rollout.shards.lag lets each replica's informer show the stored status
// one write late, -rollout.shards.stall lets the driver's shard leave a
// replica and come back before its next tick (a stalled tick): both make
// a replica take the drive over from a status older than the stored one.
// They found that a driver wrote its decision over a rollback another
// driver had written since; the driver now decides only on the status
// stored (read from the API when its informer disagrees) and writes only
// over the status it decided from. Both are on by default.

var (
	shardsSequences = flag.Int("rollout.shards.sequences", 400, "random event sequences the rollout model test with --shards runs")
	shardsSeed      = flag.Int64("rollout.shards.seed", 0, "run only the sequence of this seed with --shards")
	shardsLag       = flag.Bool("rollout.shards.lag", true, "let each replica's informer show the stored status one write late")
	shardsRandom    = flag.Bool("rollout.shards.random", false, "run sequences of new random seeds, not the fixed ones")
	shardsStall     = flag.Bool("rollout.shards.stall", true, "let the driver's shard leave a replica and come back before its next tick")
)

// modelShards is how many shards the replicas share.
const modelShards = 4

func TestRolloutModelWithShards(t *testing.T) {
	if *shardsSeed != 0 {
		runShardsSequence(t, *shardsSeed)
		return
	}
	// CI runs a fixed set of sequences, as TestRolloutModel does;
	// -rollout.shards.random runs new ones.
	base := int64(1)
	if *shardsRandom {
		base = time.Now().UnixNano()
	}
	seen := map[string]int{}
	for i := 0; i < *shardsSequences && !t.Failed(); i++ {
		for reason, n := range runShardsSequence(t, base+int64(i)) {
			seen[reason] += n
		}
	}
	t.Logf("decisions announced in %d sequences: %v", *shardsSequences, seen)
	// A model whose rollouts never get through a gate checks little.
	if *shardsSequences >= 100 && !t.Failed() && (seen["RolloutStepPassed"] == 0 || seen["RolloutRolledBack"] == 0) {
		t.Errorf("no step passed or no rollout rolled back in %d sequences: the model no longer exercises the gate", *shardsSequences)
	}
}

// randomHook is a hook's behaviour, good half the time: a rollout then
// gets through its steps often enough to be checked.
func randomHook(rng *rand.Rand) behaviour {
	if rng.Intn(2) == 0 {
		return good
	}
	return behaviour(1 + rng.Intn(3))
}

// shardOf is the shard of a parent's or the driver's key.
func shardOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % modelShards)
}

// replica is one composite-apiserver of the group.
type replica struct {
	id    string
	alive bool
	// w is its informers' view of the parents (cache, synced, visible);
	// the truth is the model's.
	w *world
	// seen is the stored status as its informer has it.
	seen             *v1alpha1.RolloutStatus
	d                *Driver
	update, previous *fakeLoop
	// sawRollback says it ticked since its informer showed the rollback.
	sawRollback bool
	// reportedAt is the event of its last tick that reported on the step
	// under way.
	reportedAt int
}

// shardsModel is one random sequence with --shards.
type shardsModel struct {
	t     *testing.T
	seed  int64
	rng   *rand.Rand
	clock *clocktesting.FakePassiveClock
	// w is the truth: the parents, their order, and which revision last
	// synced each, healthy or not.
	w        *world
	replicas []*replica
	holders  []string
	// holds number each shard's holds, as Member.Epoch does: a new one at
	// every move.
	holds []uint64

	spec      v1alpha1.ControllerRollout
	stored    *v1alpha1.RolloutStatus
	revision  int64
	hook      map[int64]behaviour
	resumedAt time.Time
	failWrite bool
	finished  bool
	trace     []string

	// What the checks remember, as model does; tick is the replica
	// ticking, tickStatus the status its decision starts from.
	begun      map[int64]int32
	passed     map[int64]int32
	rolledBack bool
	tick       *replica
	tickStatus v1alpha1.RolloutStatus
	// tickReports are the replicas' reports the ticking replica sees.
	tickReports []v1alpha1.RolloutReplicaReport
	tickSynced  bool
	// now counts the events; touched is the event that last changed
	// each parent in truth.
	now     int
	touched map[types.UID]int
	// events counts the Events recorded, by reason.
	events map[string]int
}

// fakeGroup is a replica's part of the shard group: it holds the shards
// the model's holders give it.
type fakeGroup struct {
	m *shardsModel
	r *replica
}

func (g fakeGroup) Owns(key string) bool { return g.m.holders[shardOf(key)] == g.r.id }
func (g fakeGroup) Begin(ctx context.Context, key string) (context.Context, func(), bool) {
	if !g.Owns(key) {
		return nil, nil, false
	}
	return ctx, func() {}, true
}
func (g fakeGroup) OnGained(func(gained func(key string) bool)) {}
func (g fakeGroup) Epoch(key string) uint64 {
	if s := shardOf(key); g.m.holders[s] == g.r.id {
		return g.m.holds[s] + 1
	}
	return 0
}
func (g fakeGroup) Identity() string  { return g.r.id }
func (g fakeGroup) Holders() []string { return slices.Clone(g.m.holders) }
func (g fakeGroup) Owned() []int {
	var out []int
	for s, h := range g.m.holders {
		if h == g.r.id {
			out = append(out, s)
		}
	}
	return out
}

// shardsController is the controller as one replica sees it: the stored
// status its informer shows, and writes of the one status all share.
type shardsController struct {
	m *shardsModel
	r *replica
}

func (c shardsController) Stored() *v1alpha1.RolloutStatus { return c.r.seen.DeepCopy() }

// WriteRollout changes the stored status as a write that reads it fresh
// does; each replica's informer shows the write now or one write late.
// Fresh is the stored status, as a read from the API has it.
func (c shardsController) Fresh(context.Context) (*v1alpha1.RolloutStatus, error) {
	return c.m.stored.DeepCopy(), nil
}

func (c shardsController) WriteRollout(_ context.Context, change func(*v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error)) error {
	if c.m.failWrite {
		return errors.New("the object has been modified; please apply your changes to the latest version and try again")
	}
	before := c.m.stored
	next, err := change(before.DeepCopy())
	if err != nil {
		return err
	}
	c.m.stored = next
	for _, r := range c.m.replicas {
		if *shardsLag && c.m.rng.Intn(3) == 0 {
			r.seen = before.DeepCopy()
		} else {
			r.seen = c.m.stored.DeepCopy()
		}
	}
	return nil
}
func (c shardsController) Event(_, reason, message string) { c.m.event(c.r, reason, message) }
func (c shardsController) Done()                           {}
func (c shardsController) Panicked(err error) {
	c.m.fail("replica %s's driver panicked: %v\n%s", c.r.id, err, err.(*parentloop.PanicError).Stack)
}

// runShardsSequence runs the sequence of seed, and returns how many
// Events of each reason its drivers recorded.
func runShardsSequence(t *testing.T, seed int64) map[string]int {
	m := &shardsModel{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)),
		w:     &world{cache: map[types.UID]*unstructured.Unstructured{}, lastRevision: map[types.UID]int64{}, healthy: map[types.UID]bool{}, synced: true},
		hook:  map[int64]behaviour{1: good},
		begun: map[int64]int32{}, passed: map[int64]int32{}, touched: map[types.UID]int{}, events: map[string]int{}}
	for i := 0; i < 2+m.rng.Intn(2); i++ {
		m.replicas = append(m.replicas, &replica{id: fmt.Sprintf("replica-%d", i), alive: true})
	}
	for s := 0; s < modelShards; s++ {
		m.holders = append(m.holders, m.replicas[m.rng.Intn(len(m.replicas))].id)
		m.holds = append(m.holds, 0)
	}
	for i := 0; i < 5+m.rng.Intn(40); i++ {
		m.createParent()
	}
	for _, p := range m.w.truth {
		m.syncWith(nil, p, 1)
	}
	m.spec = randomRollout(m.rng)
	m.revision = 2
	m.hook[2] = randomHook(m.rng)
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: 1, UpdateRevision: 2, Steps: int32(len(m.spec.Steps)), Phase: v1alpha1.RolloutProgressing, Reason: "RolloutBegun"}
	m.begun[2], m.passed[2] = -1, -1
	for _, r := range m.replicas {
		m.newDriver(r, m.rng.Intn(2) == 0)
	}
	m.logf("seed %d: %d parents, %d replicas, shards held by %v, driver's shard %d, rollout %s, revision 2's hook %s",
		seed, len(m.w.truth), len(m.replicas), m.holders, shardOf(DriverKey("hello")), describe(m.spec), m.hook[2])
	for ; m.now < *modelEvents && !m.finished && !t.Failed(); m.now++ {
		m.step()
		m.check()
	}
	return m.events
}

// newDriver starts a replica's driver anew from the stored status, as
// its restart or a new revision does; fresh, its informers have not
// listed and show a part of the parents, or none.
func (m *shardsModel) newDriver(r *replica, fresh bool) {
	r.alive, r.sawRollback, r.seen = true, false, m.stored.DeepCopy()
	if r.w == nil || fresh {
		r.w = &world{cache: map[types.UID]*unstructured.Unstructured{}, order: slices.Clone(m.w.order)}
		for _, p := range m.w.truth {
			r.w.cache[p.GetUID()] = p.DeepCopy()
		}
		r.w.visible = m.rng.Intn(len(r.w.cache) + 1)
	}
	r.w.synced = !fresh
	r.update = &fakeLoop{w: r.w, enqueued: map[string]bool{}}
	r.previous = &fakeLoop{w: r.w, enqueued: map[string]bool{}}
	d, err := New(Config{Key: "hello", Spec: m.spec.DeepCopy(), Status: m.stored.DeepCopy(), ResumedAt: m.resumedAt,
		Update: r.update, Previous: r.previous, Controller: shardsController{m, r}, Shards: fakeGroup{m, r}, Clock: m.clock})
	if err != nil {
		m.fail("can't make replica %s's driver: %v", r.id, err)
	}
	r.d = d
}

func (m *shardsModel) logf(format string, args ...interface{}) {
	m.trace = append(m.trace, fmt.Sprintf(format, args...))
}

func (m *shardsModel) fail(format string, args ...interface{}) {
	m.t.Helper()
	last := m.trace[max(0, len(m.trace)-60):]
	m.t.Fatalf("seed %d (replay: go test ./internal/controller/rolloutdriver -run TestRolloutModelWithShards -rollout.shards.seed=%d -rollout.shards.lag=%v -rollout.shards.stall=%v): %s\nshards held by %v\nstored status: %+v\nlast events:\n  %s",
		m.seed, m.seed, *shardsLag, *shardsStall, fmt.Sprintf(format, args...), m.holders, m.stored, strings.Join(last, "\n  "))
}

func (m *shardsModel) alive() []*replica {
	var out []*replica
	for _, r := range m.replicas {
		if r.alive {
			out = append(out, r)
		}
	}
	return out
}

// step is one random event, of a live replica when it is one's.
func (m *shardsModel) step() {
	live := m.alive()
	r := live[m.rng.Intn(len(live))]
	switch n := m.rng.Intn(100); {
	case n < 30:
		m.tickOf(r, 2*time.Second)
	case n < 52:
		m.syncSome(r)
	case n < 57:
		m.echo()
	case n < 59:
		m.tickOf(r, time.Duration(m.rng.Intn(600))*time.Second)
	case n < 62:
		m.restart()
	case n < 64:
		m.die(r, live)
	case n < 68:
		m.moveShard(m.rng.Intn(modelShards))
	case n < 70:
		m.moveShard(shardOf(DriverKey("hello")))
	case n < 75:
		if !r.w.synced {
			m.logf("%s: informers listed", r.id)
			r.w.synced = true
		}
	case n < 78:
		// Failing a third of the time it would be failing with
		// model's toggle: the replicas' reports need writes too.
		if m.failWrite || m.rng.Intn(3) == 0 {
			m.failWrite = !m.failWrite
			m.logf("status writes fail: %v", m.failWrite)
		}
	case n < 82:
		m.createParent()
	case n < 84:
		m.deleteParent()
	case n < 87:
		m.pauseParent()
	case n < 89:
		m.changeParent()
	default:
		m.editController()
	}
}

// restart runs a replica anew, dead or not, from the stored status.
func (m *shardsModel) restart() {
	r := m.replicas[m.rng.Intn(len(m.replicas))]
	m.logf("%s restarts", r.id)
	m.newDriver(r, true)
}

// die stops a replica; its shards stay its own until they move.
func (m *shardsModel) die(r *replica, live []*replica) {
	if len(live) < 2 {
		return
	}
	r.alive = false
	m.logf("%s dies", r.id)
}

// moveShard gives a shard to another live replica, or to nobody while its
// holder is dead (its Lease expired, not yet taken).
func (m *shardsModel) moveShard(s int) {
	var to []string
	for _, r := range m.alive() {
		if r.id != m.holders[s] {
			to = append(to, r.id)
		}
	}
	if h := m.holders[s]; h != "" && !m.replicaOf(h).alive {
		to = append(to, "")
	}
	if len(to) == 0 {
		return
	}
	from := m.holders[s]
	m.holders[s] = to[m.rng.Intn(len(to))]
	m.holds[s] = m.holds[s] + 1
	m.logf("shard %d moves from %q to %q", s, from, m.holders[s])
	// A shard comes back no sooner than its Lease's duration, many ticks:
	// the replica it left ticks at least once before, unless its ticks
	// stall.
	if r := m.replicaOf(from); !*shardsStall && r != nil && r.alive && s == shardOf(DriverKey("hello")) {
		m.tickOf(r, 0)
	}
}

func (m *shardsModel) replicaOf(id string) *replica {
	for _, r := range m.replicas {
		if r.id == id {
			return r
		}
	}
	return nil
}

// editController is an edit of the controller an operator or author
// makes, which every live replica's driver follows.
func (m *shardsModel) editController() {
	// Rarer than model's: a rollout removed or replaced ends what it
	// checks, and with --shards a step takes more events to pass.
	switch n := m.rng.Intn(30); {
	case n < 7:
		m.spec.Paused = !m.spec.Paused
		m.logf("spec.rollout.paused: %v", m.spec.Paused)
	case n < 14:
		skew := time.Duration(m.rng.Intn(61)-30) * time.Second
		m.resumedAt = m.clock.Now().Add(skew)
		m.logf("kubectl composite rollout resume, the client's clock %v off", skew)
	case n < 19:
		keep := 1 + m.rng.Intn(len(m.spec.Steps))
		m.spec.Steps = m.spec.Steps[:keep]
		m.logf("steps cut to %d", keep)
	case n < 28:
		m.hook[m.revision] = randomHook(m.rng)
		m.logf("revision %d's hook now %s", m.revision, m.hook[m.revision])
		return
	case n < 29:
		m.thirdRevision()
		return
	default:
		m.removeRollout()
		return
	}
	for _, r := range m.alive() {
		if err := r.d.Follow(m.spec.DeepCopy(), m.resumedAt); err != nil {
			m.fail("%s: follow: %v", r.id, err)
		}
	}
}

// removeRollout removes spec.rollout: every live replica finishes.
func (m *shardsModel) removeRollout() {
	m.logf("spec.rollout removed")
	m.finished = true
	for _, r := range m.alive() {
		r.d.Finish()
		for _, p := range r.w.view() {
			if !r.update.runs(p) {
				m.fail("spec.rollout removed, and %s is not run by the update revision on %s", p.GetName(), r.id)
			}
		}
	}
}

// thirdRevision is a new spec mid-rollout: every replica's loops restart
// over the revision the parents not moved run.
func (m *shardsModel) thirdRevision() {
	current := m.stored.CurrentRevision
	if m.stored.Phase == v1alpha1.RolloutComplete {
		current = m.stored.UpdateRevision
	}
	m.revision++
	m.hook[m.revision] = randomHook(m.rng)
	m.spec = randomRollout(m.rng)
	m.stored = &v1alpha1.RolloutStatus{CurrentRevision: current, UpdateRevision: m.revision, Steps: int32(len(m.spec.Steps)),
		Phase: v1alpha1.RolloutProgressing, Reason: "RolloutBegun"}
	m.begun[m.revision], m.passed[m.revision] = -1, -1
	m.rolledBack = false
	m.logf("revision %d over revision %d, rollout %s, its hook %s", m.revision, current, describe(m.spec), m.hook[m.revision])
	for _, r := range m.alive() {
		m.newDriver(r, m.rng.Intn(2) == 0)
	}
}

// tickOf is a tick of a replica's driver, driving or following.
func (m *shardsModel) tickOf(r *replica, d time.Duration) {
	m.clock.SetTime(m.clock.Now().Add(d))
	// The status its decision starts from: the stored one as its
	// informer shows it when it takes the drive or follows (adopt).
	m.tick, m.tickSynced, m.tickStatus = r, r.w.synced, *r.d.status.DeepCopy()
	m.tickReports = nil
	if r.seen != nil {
		m.tickReports = slices.Clone(r.seen.Replicas)
	}
	if driving := m.holders[shardOf(DriverKey("hello"))] == r.id; (!driving || !r.d.shards.driving) && r.seen != nil && r.seen.UpdateRevision == r.d.status.UpdateRevision {
		m.tickStatus = *r.seen.DeepCopy()
		m.tickStatus.Replicas = nil
	}
	seenRollback := r.seen != nil && r.seen.UpdateRevision == m.revision && r.seen.Phase == v1alpha1.RolloutRolledBack
	r.d.tick(context.Background())
	m.tick = nil
	if seenRollback && m.rolledBack {
		r.sawRollback = true
	}
	if st := r.d.status; r.w.synced && !m.failWrite && st.Phase == v1alpha1.RolloutProgressing && st.StepStartTime != nil {
		r.reportedAt = m.now
	}
	m.logf("%s tick +%v: driving %v, stored %s step %d/%d %s %q bucketLimit %d, %d reports", r.id, d, r.d.shards.driving,
		m.stored.Phase, m.stored.Step, m.stored.Steps, m.stored.Reason, m.stored.Message, m.stored.BucketLimit, len(m.stored.Replicas))
}

// syncSome syncs a few of the replica's parents, those its driver queued
// first: its loops take only the parents of its shards.
func (m *shardsModel) syncSome(r *replica) {
	var view []*unstructured.Unstructured
	for _, p := range r.w.view() {
		if k, _ := cache.MetaNamespaceKeyFunc(p); m.holders[shardOf(k)] == r.id {
			view = append(view, p)
		}
	}
	for i := 0; i < 1+m.rng.Intn(5) && len(view) > 0; i++ {
		m.sync(r, view[m.rng.Intn(len(view))])
	}
	for _, l := range []*fakeLoop{r.update, r.previous} {
		for k := range l.enqueued {
			delete(l.enqueued, k)
			for _, p := range view {
				if pk, _ := cache.MetaNamespaceKeyFunc(p); pk == k {
					m.sync(r, p)
				}
			}
		}
	}
}

// sync is the replica's loops' sync of a cached parent of its shards.
func (m *shardsModel) sync(r *replica, p *unstructured.Unstructured) {
	if pausedParent(p) || m.finished {
		return
	}
	up, prev := r.update.runs(p), r.previous.runs(p)
	if up == prev {
		m.fail("parent %s is run by both revisions or neither on %s, which holds it (update %v, previous %v)", p.GetName(), r.id, up, prev)
	}
	if up && r.sawRollback && m.rolledBack {
		m.fail("rolled back, and %s syncs %s with the update revision", r.id, p.GetName())
	}
	revision := r.d.status.CurrentRevision
	if up {
		revision = r.d.status.UpdateRevision
	}
	truth := m.truthOf(p.GetUID())
	if truth == nil {
		return
	}
	written := m.syncWith(r, truth, revision)
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
	r.update.rev.Load().Synced(p, out)
	if m.rng.Intn(2) == 0 {
		m.echo()
	}
}

// syncWith is revision's hook's sync of the parent in truth, as world's
// model does; the syncing replica's informer may see its write at once.
func (m *shardsModel) syncWith(r *replica, p *unstructured.Unstructured, revision int64) string {
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
	m.touched[p.GetUID()] = m.now
	if r != nil && r.w.synced && m.rng.Intn(3) == 0 {
		r.w.cache[p.GetUID()] = p.DeepCopy()
	}
	return rv
}

// echo brings every live replica's caches, and its copy of the stored
// status, up to date.
func (m *shardsModel) echo() {
	for _, r := range m.alive() {
		for _, p := range m.w.truth {
			r.w.cache[p.GetUID()] = p.DeepCopy()
		}
		r.seen = m.stored.DeepCopy()
	}
}

func (m *shardsModel) truthOf(uid types.UID) *unstructured.Unstructured {
	for _, p := range m.w.truth {
		if p.GetUID() == uid {
			return p
		}
	}
	return nil
}

// seeEverywhere puts the parent as it is in truth in every replica's
// cache.
func (m *shardsModel) seeEverywhere(p *unstructured.Unstructured) {
	for _, r := range m.replicas {
		if r.w != nil {
			r.w.cache[p.GetUID()] = p.DeepCopy()
		}
	}
}

func (m *shardsModel) createParent() {
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
	m.touched[p.GetUID()] = m.now
	for _, r := range m.replicas {
		if r.w != nil {
			r.w.order = append(r.w.order, p.GetUID())
		}
	}
	m.seeEverywhere(p)
	key, _ := cache.MetaNamespaceKeyFunc(p)
	m.logf("%s created, labels %v, shard %d", p.GetName(), p.GetLabels(), shardOf(key))
}

func (m *shardsModel) deleteParent() {
	if len(m.w.truth) == 0 {
		return
	}
	i := m.rng.Intn(len(m.w.truth))
	p := m.w.truth[i]
	m.w.truth = append(m.w.truth[:i], m.w.truth[i+1:]...)
	for _, r := range m.replicas {
		if r.w != nil {
			delete(r.w.cache, p.GetUID())
		}
	}
	m.logf("%s deleted", p.GetName())
}

func (m *shardsModel) pauseParent() {
	if len(m.w.truth) == 0 {
		return
	}
	p := m.w.truth[m.rng.Intn(len(m.w.truth))]
	paused := !pausedParent(p)
	p.SetAnnotations(map[string]string{v1alpha1.ParentPausedAnnotation: strconv.FormatBool(paused)})
	p.SetResourceVersion(m.w.nextRV())
	m.touched[p.GetUID()] = m.now
	m.seeEverywhere(p)
	m.logf("%s paused by annotation: %v", p.GetName(), paused)
}

func (m *shardsModel) changeParent() {
	if len(m.w.truth) == 0 {
		return
	}
	p := m.w.truth[m.rng.Intn(len(m.w.truth))]
	p.SetGeneration(p.GetGeneration() + 1)
	p.SetResourceVersion(m.w.nextRV())
	m.w.healthy[p.GetUID()] = false
	m.touched[p.GetUID()] = m.now
	m.seeEverywhere(p)
}

// event checks each decision as its Event announces it.
func (m *shardsModel) event(r *replica, reason, message string) {
	m.logf("%s: Event %s: %s", r.id, reason, message)
	m.events[reason]++
	step := int32(-1)
	if s := stepOf.FindStringSubmatch(message); s != nil {
		n, _ := strconv.Atoi(s[1])
		step = int32(n - 1)
	}
	switch reason {
	case "RolloutStepBegun":
		m.checkBegun(r, step)
	case "RolloutStepPassed":
		m.checkPassed(r, step)
	case "RolloutRolledBack":
		m.rolledBack = true
	case "RolloutResumed":
		m.rolledBack = false
		for _, r := range m.replicas {
			r.sawRollback = false
		}
	}
}

// checkBegun: a step begins only in a tick of the replica holding the
// driver's shard, on its synced view, after the step before it passed.
func (m *shardsModel) checkBegun(r *replica, step int32) {
	if m.tick != r || !m.tickSynced {
		m.fail("step %d began on %s, on a view that had not listed", step+1, r.id)
	}
	if h := m.holders[shardOf(DriverKey("hello"))]; h != r.id {
		m.fail("step %d began on %s, but the driver's shard is %q's", step+1, r.id, h)
	}
	if step > 0 && m.passed[m.revision] < step-1 {
		m.fail("step %d began before step %d passed (passed so far: %d)", step+1, step, m.passed[m.revision]+1)
	}
	m.begun[m.revision] = step
}

// checkPassed: a step passes only once it began, on the driver's synced
// view, with every parent it moved (but those paused) last synced by the
// update revision and healthy, whichever replica holds it. Another
// replica's parents are judged by its report, made at its last tick: a
// parent created, changed or synced since is not (its holder reports on
// it at its next tick, or its shard goes unreported once the holder's
// Lease expires).
func (m *shardsModel) checkPassed(r *replica, step int32) {
	if m.tick != r || !m.tickSynced {
		m.fail("step %d passed on %s, on a view that had not listed", step+1, r.id)
	}
	if m.begun[m.revision] != step {
		m.fail("step %d passed, but the step begun last is %d", step+1, m.begun[m.revision]+1)
	}
	plan, err := rollout.NewPlan(m.spec.Steps, &m.tickStatus)
	if err != nil {
		m.fail("the status the tick began with has no plan: %v", err)
	}
	for _, p := range r.w.view() {
		key, _ := cache.MetaNamespaceKeyFunc(p)
		holder := m.replicaOf(m.holders[shardOf(key)])
		if !plan.Updated(p) || pausedParent(p) {
			continue
		}
		if holder != r && holder != nil {
			if !m.reported(holder, shardOf(key)) {
				m.fail("step %d passed on %s, but %s, which it moved, is of shard %d, and its holder %s has not reported on the step", step+1, r.id, p.GetName(), shardOf(key), holder.id)
			}
			if m.touched[p.GetUID()] >= holder.reportedAt {
				continue
			}
		}
		if uid := p.GetUID(); m.w.lastRevision[uid] != m.revision || !m.w.healthy[uid] {
			m.fail("step %d passed on %s, but %s (shard %d, held by %q), which it moved, was last synced by revision %d, healthy %v",
				step+1, r.id, p.GetName(), shardOf(key), m.holders[shardOf(key)], m.w.lastRevision[uid], m.w.healthy[uid])
		}
	}
	m.passed[m.revision] = max(m.passed[m.revision], step)
}

// reported tells whether the reports the driver saw hold one of the
// step under way by the holder of shard s, which covers it.
func (m *shardsModel) reported(holder *replica, s int) bool {
	for i := range m.tickReports {
		rep := &m.tickReports[i]
		if rep.Replica == holder.id && slices.Contains(rep.Shards, int32(s)) && rollout.OfStep(rep, &m.tickStatus) {
			return true
		}
	}
	return false
}

// check holds after every event: on every live replica, no parent of its
// shards is run by both revisions or neither; after a rollback, no parent
// runs the update revision in the fleet preview (rollout.NewPlan of the
// stored status), nor in the loops of a replica that has ticked since its
// informer showed the rollback.
func (m *shardsModel) check() {
	if m.finished {
		return
	}
	stored, err := rollout.NewPlan(m.spec.Steps, m.stored)
	if err != nil {
		m.fail("the stored status has no plan: %v", err)
	}
	for _, r := range m.alive() {
		for _, p := range r.w.view() {
			key, _ := cache.MetaNamespaceKeyFunc(p)
			if m.holders[shardOf(key)] != r.id {
				continue
			}
			up, prev := r.update.runs(p), r.previous.runs(p)
			if up == prev {
				m.fail("parent %s is run by both revisions or neither on %s, which holds it", p.GetName(), r.id)
			}
			if m.rolledBack && (stored.Updated(p) || r.sawRollback && up) {
				m.fail("rolled back, and %s runs the update revision (loop of %s %v, /sync %v)", p.GetName(), r.id, up, stored.Updated(p))
			}
		}
	}
}
