package rollout

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

const shardGroup = "e2e-rollout-shards"

// shardArgs run a replica in this file's shard group, with Leases short
// enough for a test and a renew deadline a loaded machine keeps.
var shardArgs = []string{
	fmt.Sprintf("--shards=%d", shard.DefaultShards), "--leader-elect-lease-name=" + shardGroup,
	"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s",
}

// TestShardedRolloutSurvivesItsDriversDeath rolls a change of a
// CompositeController out over 60 parents in three steps on three replicas
// run with --shards (the stack's own, behind the APIService, and two
// more), the new hook failing seven parents of the second step, and kills
// the replica that drives the rollout during the pause after its first
// step. Another replica takes the rollout on where it was: the second step
// begins no sooner than the pause recorded before the death ends, and
// pauses naming exactly the seven, whichever replicas sync them; no parent
// of the third step meets the new hook. Resumed once the hook is fixed,
// the rollout completes; every step began only once the one before it
// passed, and no parent was synced by the old revision after the new one,
// or by two replicas at once.
func TestShardedRolloutSurvivesItsDriversDeath(t *testing.T) {
	// Sequential: restarts and kills the server and starts replicas.
	suite.SetUpHellos(t)
	ctx := context.Background()
	const name, ns = "rollout-shards", "rollout-shards"
	suite.RestartWith(t, shardArgs...)
	replicas := []*framework.Process{suite.CompositeProcess()}
	for _, n := range []string{"rollout-replica-b", "rollout-replica-c"} {
		p, err := suite.StartReplica(ctx, n, shardArgs...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(30 * time.Second) })
		replicas = append(replicas, p)
	}
	waitShardsHeld(t, 3)

	rollout := `    - selector: {matchLabels: {wave: "1"}}
      pauseSeconds: 15
    - selector: {matchLabels: {wave: "2"}}
    - percent: 100
    health:
      deadlineSeconds: 30
`
	hook := startRollout(t, name, ns, rollout)
	var parents, bad []string
	waves := map[string][]string{}
	for i := 0; i < rolloutParents; i++ {
		p := fmt.Sprintf("p-%02d", i)
		wave := fmt.Sprint(1 + i/20)
		labels := map[string]string{"test": name, "wave": wave}
		if wave == "2" && i%3 == 0 {
			// Seven parents, in shards of every replica but rarely
			// (3^-7) all of the driver's.
			labels["bad"] = "true"
			bad = append(bad, ns+"/"+p)
		}
		suite.CreateHello(t, ns, p, "", map[string]interface{}{"greeting": "hello"}, framework.WithLabels(labels))
		parents = append(parents, p)
		waves[wave] = append(waves[wave], ns+"/"+p)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, 3*time.Minute)

	hook.broken.Store("v2")
	changed := time.Now()
	suite.MustApply(t, rolloutControllerWith(name, hook.url, "v2", rollout))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 3 passed", changed)
	var passed *v1alpha1.RolloutStatus
	suite.Within(t, "status.rollout naming its driver and when the second step may begin", time.Minute, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		passed = got.Status.Rollout
		return passed != nil && passed.Step == 1 && passed.NextStepTime != nil && passed.Driver != "", nil
	})
	if len(passed.Replicas) == 0 {
		t.Errorf("status.rollout.replicas is empty after a step with --shards: want each replica's report")
	}

	// The driver dies in the pause; if it is the stack's own replica, it
	// comes back as a new member (a new identity), as a crashed pod does.
	driver := processOf(t, passed.Driver, replicas)
	t.Logf("killing %s, the rollout's driver (%s), in the pause after step 1", driver.Name, passed.Driver)
	if driver == suite.CompositeProcess() {
		suite.KillComposite()
		if err := suite.StartComposite(ctx, shardArgs...); err != nil {
			t.Fatal(err)
		}
		if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
			t.Fatal(err)
		}
	} else {
		driver.Kill()
	}

	controllerEvent(t, name, "RolloutPaused", "paused at step 2 of 3", changed)
	// The driver writes the pause before it records the Event; the
	// other replica's report, from its own cache, may land in between.
	suite.Within(t, fmt.Sprintf("status.rollout paused at step index 1 naming exactly the bad parents %v", bad), 30*time.Second, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status.Rollout
		return st != nil && st.Phase == v1alpha1.RolloutPaused && st.Step == 1 && slices.Equal(st.FailingParents, bad), nil
	})
	for _, p := range waves["3"] {
		if n := hook.callsOf(p)["v2"]; n != 0 {
			t.Errorf("%s, of the third step, was synced %d times by revision 2's hook while the rollout paused at the second", p, n)
		}
	}

	// Fixed and resumed: every replica syncs its bad parents again.
	hook.broken.Store("")
	if r := kubectlComposite(t, "rollout", "resume", name); r.code != 0 {
		t.Fatalf("kubectl composite rollout resume: exit %d", r.code)
	}
	if r := kubectlComposite(t, "rollout", "status", name, "--timeout=4m"); r.code != 0 || !strings.Contains(r.stdout, "successfully rolled out") {
		t.Fatalf("kubectl composite rollout status after resume: exit %d, %q", r.code, r.stdout)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v2" }, time.Minute)
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutComplete || st.Driver == passed.Driver {
		t.Errorf("status.rollout = %+v; want it complete, driven by another replica than the dead %s", st, passed.Driver)
	}

	// Each step began once the one before passed, and the second no
	// sooner than the pause the dead driver recorded.
	lastOf := func(wave string) (last time.Time) {
		for _, p := range waves[wave] {
			if at := hook.firstCall(p, "v2"); at.After(last) {
				last = at
			}
		}
		return last
	}
	notBefore := map[string]time.Time{"2": passed.NextStepTime.Time, "3": lastOf("2")}
	if w1 := lastOf("1"); w1.After(notBefore["2"]) {
		t.Errorf("the last parent of step 1 met revision 2 at %s, after the step passed (its pause ended at %s)", w1.Format(time.StampMilli), notBefore["2"].Format(time.StampMilli))
	}
	for _, wave := range []string{"2", "3"} {
		for _, p := range waves[wave] {
			if at := hook.firstCall(p, "v2"); at.Before(notBefore[wave]) {
				t.Errorf("%s, of step %s, met revision 2 at %s, before %s", p, wave, at.Format(time.StampMilli), notBefore[wave].Format(time.StampMilli))
			}
		}
	}
	var keys []string
	for _, p := range parents {
		keys = append(keys, ns+"/"+p)
	}
	for _, problem := range hook.twoRevisions(keys, "v1", "v2") {
		t.Error(problem)
	}
}

// processOf is the replica whose shard-group identity is identity: it logs
// it when it joins the group.
func processOf(t *testing.T, identity string, replicas []*framework.Process) *framework.Process {
	t.Helper()
	for _, p := range replicas {
		log, err := os.ReadFile(p.LogFile)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), `identity="`+identity+`"`) {
			return p
		}
	}
	t.Fatalf("no replica logged the identity %q", identity)
	return nil
}

// waitShardsHeld waits until every shard of this file's group is held, by
// as many replicas as replicas.
func waitShardsHeld(t *testing.T, replicas int) {
	t.Helper()
	suite.Within(t, fmt.Sprintf("the %d shards of %s held by %d replicas", shard.DefaultShards, shardGroup, replicas), 2*time.Minute, func() (bool, error) {
		list, err := suite.Kube.CoordinationV1().Leases(framework.CompositeNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{shard.GroupLabel: shardGroup, shard.RoleLabel: "shard"}).String(),
		})
		if err != nil {
			return false, err
		}
		holders := map[string]int{}
		for _, l := range list.Items {
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				holders[*h]++
			}
		}
		if len(list.Items) != shard.DefaultShards || len(holders) != replicas {
			return false, fmt.Errorf("%d shard Leases, holders %v", len(list.Items), holders)
		}
		return true, nil
	})
}
