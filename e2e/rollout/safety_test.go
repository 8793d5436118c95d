package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

const (
	// fleetParents are the parents of each test of a change that drops
	// children: few enough to set up in seconds, enough that the later
	// steps (50 %, 100 %) move many more than the first.
	fleetParents = 20
	// slowList holds the parents' first list after a restart or a
	// failover for several of the driver's 2 s ticks.
	slowList = 10 * time.Second
	// slowStatusWrite holds each write of a parent's status past the
	// driver's next tick.
	slowStatusWrite = 5 * time.Second
	// holdFor is how long a rollout must still hold at its first step
	// once the server has seen every parent again (the slow list
	// answered, each parent synced).
	holdFor = 20 * time.Second
	// failoverLease is the Lease of the leader election test's replicas.
	failoverLease = "e2e-rollout-failover"
)

// gatedRollout is spec.rollout of a change that drops children: a first
// step of two parents, gated on the count of children the v1 hook reports
// in the parent's status, with a deadline far beyond any test.
const gatedRollout = `    - maxParents: 2
    - percent: 50
    - percent: 100
    health:
      condition: 'has(parent.status.count) && parent.status.count == 3'
      deadlineSeconds: 600
`

// failoverArgs run a replica of the leader election test, with Leases
// short enough for a test and a renew deadline a loaded machine keeps.
var failoverArgs = []string{
	"--leader-elect", "--leader-elect-lease-name=" + failoverLease,
	"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s",
}

// TestRolloutHoldsAFailingStepThroughARestartWithASlowList changes a
// controller of 20 parents to a hook that answers successfully but drops
// every child, in steps of 2 parents, 50 % and 100 % gated on the parents'
// count of children. The first step fails its gate, as it should. Then
// composite-apiserver restarts, and its first list of the parents is slow
// (a proxy holds it for several ticks of the driver): long after the
// restarted server has listed and synced every parent, the rollout is
// still at its first step, no step passed, and no parent beyond the
// first step's two has lost its children.
func TestRolloutHoldsAFailingStepThroughARestartWithASlowList(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	suite.SetUpHellos(t)
	proxy := startSlowProxy(t, framework.Hellos.Group, framework.Hellos.Resource)
	f := startFleet(t, "rollout-restart-failing", "")
	changed := f.change(t)
	moved := f.waitFirstStepFailing(t)

	proxy.lists.Store(int64(slowList))
	restarted := time.Now()
	suite.RestartWith(t, "--kubeconfig="+proxy.kubeconfig)
	f.holdsAtFirstStep(t, moved, changed, func() bool { return f.seenAgain(proxy.listPassedSince(restarted)) })
}

// TestRolloutHoldsAFailingStepThroughALeaderFailoverWithASlowList is the
// restart's case with two replicas run with --leader-elect: the leader,
// which drives the rollout, is killed while the first step fails its
// gate, and the replica that takes over lists the parents slowly. The
// rollout holds at its first step there too.
func TestRolloutHoldsAFailingStepThroughALeaderFailoverWithASlowList(t *testing.T) {
	// Sequential: restarts and kills the server and starts a replica.
	suite.SetUpHellos(t)
	ctx := context.Background()
	proxy := startSlowProxy(t, framework.Hellos.Group, framework.Hellos.Resource)
	args := append(slices.Clone(failoverArgs), "--kubeconfig="+proxy.kubeconfig)
	suite.RestartWith(t, args...)
	second, err := suite.StartReplica(ctx, "rollout-failover-second", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop(30 * time.Second) })
	f := startFleet(t, "rollout-failover-failing", "")
	changed := f.change(t)
	moved := f.waitFirstStepFailing(t)

	var leader string
	suite.Within(t, "a holder of the Lease "+failoverLease, time.Minute, func() (bool, error) {
		leader = leaseHolder(t)
		return leader != "", nil
	})
	proxy.lists.Store(int64(slowList))
	failed := time.Now()
	switch pid := pidOf(t, leader); pid {
	case second.Pid():
		t.Logf("killing the second replica, the leader (%s), while the first step fails", leader)
		second.Kill()
	case suite.CompositeProcess().Pid():
		// The APIService's replica comes back, as a crashed pod does,
		// so that the API serves again; it may lead or stand by.
		t.Logf("killing the stack's replica, the leader (%s), while the first step fails", leader)
		suite.KillComposite()
		if err := suite.StartComposite(ctx, args...); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("the Lease's holder %q is neither replica (pids %d, %d)", leader, second.Pid(), suite.CompositeProcess().Pid())
	}
	f.holdsAtFirstStep(t, moved, changed, func() bool {
		if h := leaseHolder(t); h == "" || h == leader {
			return false
		}
		return f.seenAgain(proxy.listPassedSince(failed))
	})
}

// TestRolloutStopsAChangeThatDropsChildrenAtItsFirstStep: the health gate
// holds a change that drops children at its first step, only that step's
// two parents losing theirs, though kube-apiserver is slow to take the
// parents' status writes (a proxy holds each for 5 s): the gate judges
// the status the change's hook answered, not the one the parents had
// before. kubectl composite rollout undo then gives the children back.
func TestRolloutStopsAChangeThatDropsChildrenAtItsFirstStep(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	suite.SetUpHellos(t)
	proxy := startSlowProxy(t, framework.Hellos.Group, framework.Hellos.Resource)
	suite.RestartWith(t, "--kubeconfig="+proxy.kubeconfig)
	f := startFleet(t, "rollout-drop-gated", "")
	proxy.statusWrites.Store(int64(slowStatusWrite))
	changed := f.change(t)
	moved := f.waitFirstStepFailing(t)
	f.holdsAtFirstStep(t, moved, changed, func() bool { return true })

	proxy.statusWrites.Store(0)
	undone := time.Now()
	if r := kubectlComposite(t, "rollout", "undo", f.name); r.code != 0 {
		t.Fatalf("kubectl composite rollout undo: exit %d", r.code)
	}
	suite.Within(t, "the first step's parents synced by v1 again, with their children", 2*time.Minute, func() (bool, error) {
		counts := childCounts(t, f.ns)
		for _, p := range f.parents {
			name := strings.TrimPrefix(p, f.ns+"/")
			if slices.Contains(moved, p) && !f.hook.calledSince(p, undone) {
				return false, fmt.Errorf("%s not synced since the undo", p)
			}
			if counts[name] != childrenPerParent {
				return false, fmt.Errorf("%s has %d of its %d ConfigMaps", p, counts[name], childrenPerParent)
			}
		}
		return true, nil
	})
	if got := f.hook.calledAbout("v2"); !slices.Equal(got, moved) {
		t.Errorf("the hook of the change was called about %v, want only the first step's %v", got, moved)
	}
}

// TestRolloutWithoutRevisionHistoryIsGatedAtItsFirstStep: a controller
// with revisionHistoryLimit 0 still rolls a change out; the change that
// drops children is gated at its first step, not landed on every parent
// at once.
func TestRolloutWithoutRevisionHistoryIsGatedAtItsFirstStep(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	f := startFleet(t, "rollout-no-history", "  revisionHistoryLimit: 0\n")
	changed := f.change(t)
	moved := f.waitFirstStepFailing(t)
	f.holdsAtFirstStep(t, moved, changed, func() bool { return true })
}

// fleet is a controller of its own hellos (labelled test=<name>, in the
// namespace <name>), rolling changes out in gatedRollout's steps, with
// its parents converged on the v1 hook.
type fleet struct {
	name, ns string
	// specTail is appended to the controller's spec, indented.
	specTail string
	hook     *childrenHook
	// parents are namespace/name.
	parents []string
}

func startFleet(t *testing.T, name, specTail string) *fleet {
	t.Helper()
	f := &fleet{name: name, ns: name, specTail: specTail, hook: startChildrenHook(t)}
	suite.MustCreateNamespace(t, f.ns)
	suite.ApplyController(t, name, f.controller("v1"))
	for i := 0; i < fleetParents; i++ {
		p := fmt.Sprintf("p-%02d", i)
		suite.CreateHello(t, f.ns, p, name, map[string]interface{}{"greeting": "hello"})
		f.parents = append(f.parents, f.ns+"/"+p)
	}
	suite.Within(t, "every parent with its ConfigMaps", 3*time.Minute, func() (bool, error) {
		counts := childCounts(t, f.ns)
		for _, p := range f.parents {
			if n := counts[strings.TrimPrefix(p, f.ns+"/")]; n != childrenPerParent {
				return false, fmt.Errorf("%s has %d ConfigMaps", p, n)
			}
		}
		return true, nil
	})
	return f
}

func (f *fleet) controller(revision string) string {
	return rolloutControllerWith(f.name, f.hook.url, revision, gatedRollout+f.specTail)
}

// change applies the change to the v2 hook, which drops every child, and
// returns when.
func (f *fleet) change(t *testing.T) time.Time {
	t.Helper()
	changed := time.Now()
	suite.MustApply(t, f.controller("v2"))
	return changed
}

// waitFirstStepFailing waits until the change's first step is under way
// and failing its gate: the parents it moved synced by v2, without their
// children, none of them healthy. It returns those parents, and fails at
// once when the rollout is anywhere but at its first step.
func (f *fleet) waitFirstStepFailing(t *testing.T) []string {
	t.Helper()
	var moved []string
	suite.Within(t, "the change's first step begun and failing its gate", 2*time.Minute, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), f.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status.Rollout
		if st == nil || st.UpdateRevision != 2 {
			return false, fmt.Errorf("status.rollout = %s, want a rollout of revision 2", describe(st))
		}
		if st.Phase != v1alpha1.RolloutProgressing || st.Step != 0 {
			f.fail(t, nil, fmt.Sprintf("status.rollout = %s, want the first step under way", describe(st)))
		}
		moved = f.hook.calledAbout("v2")
		if st.StepStartTime == nil || st.UpdatedParents < 2 || st.HealthyParents != 0 || int(st.UpdatedParents) != len(moved) {
			return false, fmt.Errorf("status.rollout = %s; the v2 hook called about %v", describe(st), moved)
		}
		counts := childCounts(t, f.ns)
		for _, p := range moved {
			if n := counts[strings.TrimPrefix(p, f.ns+"/")]; n != 0 {
				return false, fmt.Errorf("%s, moved, still has %d ConfigMaps", p, n)
			}
		}
		return true, nil
	})
	// Two parents, or three when the second shares its bucket.
	if len(moved) > 3 {
		t.Fatalf("the first step, of maxParents 2, moved %d parents: %v", len(moved), moved)
	}
	t.Logf("the first step moved %v and fails its gate", moved)
	return moved
}

// holdsAtFirstStep checks every second that the rollout of the change
// applied at changed holds at its first step (firstStepBroken). It goes on
// until holdFor past the first check at which settled holds, and fails
// when settled never holds within 3 minutes.
func (f *fleet) holdsAtFirstStep(t *testing.T, moved []string, changed time.Time, settled func() bool) {
	t.Helper()
	var settledAt time.Time
	giveUp := time.Now().Add(3 * time.Minute)
	for {
		if down := suite.Down(); down != nil {
			t.Fatalf("the stack is down: %v", down)
		}
		if broken := f.firstStepBroken(t, moved, changed); broken != "" {
			f.fail(t, moved, broken)
		}
		now := time.Now()
		if settledAt.IsZero() && settled() {
			settledAt = now
		}
		if !settledAt.IsZero() && now.Sub(settledAt) >= holdFor {
			t.Logf("held at the first step for %s from %s", now.Sub(settledAt).Round(time.Second), settledAt.Format(time.StampMilli))
			return
		}
		if settledAt.IsZero() && now.After(giveUp) {
			t.Fatalf("the server never listed and synced every parent again")
		}
		time.Sleep(time.Second)
	}
}

// firstStepBroken says how the rollout left its first step, "" when it
// did not: status.rollout Progressing at step index 0, no RolloutStepPassed
// Event since changed, the v2 hook called about no parent but moved, every
// other parent with its children.
func (f *fleet) firstStepBroken(t *testing.T, moved []string, changed time.Time) string {
	t.Helper()
	// The API is away while the server restarts: the other checks go on
	// without it.
	if got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), f.name, metav1.GetOptions{}); err == nil {
		if st := got.Status.Rollout; st == nil || st.UpdateRevision != 2 || st.Phase != v1alpha1.RolloutProgressing || st.Step != 0 {
			return fmt.Sprintf("status.rollout = %s, want it still at its first step", describe(st))
		}
	}
	if passed := stepsPassed(t, f.name, changed); len(passed) > 0 {
		return fmt.Sprintf("RolloutStepPassed Events %q while the first step fails its gate", passed)
	}
	if got := f.hook.calledAbout("v2"); slices.ContainsFunc(got, func(p string) bool { return !slices.Contains(moved, p) }) {
		return fmt.Sprintf("the hook of the change was called about %v, want only the first step's %v", got, moved)
	}
	return f.losses(t, moved)
}

// fail ends the test with what went wrong and what it cost: the parents
// beyond moved that lost children, once the loop has acted on the wrong
// decision (the losses the same three seconds running, or 15 s).
func (f *fleet) fail(t *testing.T, moved []string, what string) {
	t.Helper()
	lost, same := f.losses(t, moved), 0
	for end := time.Now().Add(15 * time.Second); same < 3 && time.Now().Before(end); {
		time.Sleep(time.Second)
		now := f.losses(t, moved)
		if now != "" && now == lost {
			same++
		} else {
			same = 0
		}
		lost = now
	}
	if lost == "" {
		lost = "no parent beyond the first step's lost ConfigMaps within 15 s"
	}
	t.Fatalf("%s; %s", what, lost)
}

// seenAgain tells whether a list of the parents was answered (passed is
// when the proxy let it through, zero while none was) and every parent
// was synced since.
func (f *fleet) seenAgain(passed time.Time) bool {
	if passed.IsZero() {
		return false
	}
	for _, p := range f.parents {
		if !f.hook.calledSince(p, passed) {
			return false
		}
	}
	return true
}

// losses says which parents but moved lost children, "" when none did.
func (f *fleet) losses(t *testing.T, moved []string) string {
	t.Helper()
	counts := childCounts(t, f.ns)
	var lost []string
	for _, p := range f.parents {
		if n := counts[strings.TrimPrefix(p, f.ns+"/")]; n != childrenPerParent && !slices.Contains(moved, p) {
			lost = append(lost, fmt.Sprintf("%s (%d left)", p, n))
		}
	}
	switch {
	case len(lost) == 0:
		return ""
	case len(moved) == 0:
		return fmt.Sprintf("%d of %d parents lost ConfigMaps: %v", len(lost), len(f.parents), lost)
	}
	return fmt.Sprintf("%d of %d parents beyond the first step's %v lost ConfigMaps: %v", len(lost), len(f.parents)-len(moved), moved, lost)
}

func describe(st *v1alpha1.RolloutStatus) string {
	if st == nil {
		return "none"
	}
	return fmt.Sprintf("{revision %d over %d, %s at step index %d of %d, %d updated, %d healthy, %s: %s}",
		st.UpdateRevision, st.CurrentRevision, st.Phase, st.Step, st.Steps, st.UpdatedParents, st.HealthyParents, st.Reason, st.Message)
}

// stepsPassed are the messages of the RolloutStepPassed Events on the
// controller name recorded since.
func stepsPassed(t *testing.T, name string, since time.Time) []string {
	t.Helper()
	list, err := suite.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=RolloutStepPassed"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		last := e.LastTimestamp.Time
		if e.EventTime.After(last) {
			last = e.EventTime.Time
		}
		if !last.Before(since.Truncate(time.Second)) {
			out = append(out, e.Message)
		}
	}
	return out
}

// leaseHolder is the holder of the leader election test's Lease, "" when
// none holds it.
func leaseHolder(t *testing.T) string {
	t.Helper()
	l, err := suite.Kube.CoordinationV1().Leases(framework.CompositeNamespace).Get(context.Background(), failoverLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// pidOf is the process id in a leader's identity, <host>_<pid>_<nanoseconds>.
func pidOf(t *testing.T, identity string) int {
	t.Helper()
	parts := strings.Split(identity, "_")
	if len(parts) < 3 {
		t.Fatalf("leader identity %q is not <host>_<pid>_<nanoseconds>", identity)
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil {
		t.Fatalf("leader identity %q: %v", identity, err)
	}
	return pid
}
