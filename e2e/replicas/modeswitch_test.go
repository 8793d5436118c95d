package replicas

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestSwitchingFromLeaderElectionToShardsSyncsNoParentTwiceAtOnce is the
// rollout from the chart's default values (--leader-elect) to its sharded
// values (--shards), as a RollingUpdate runs it: the old leader keeps
// running while the new replicas start. Every server runs with the chart's
// own arguments (but for where it runs). Parents change all along, and
// the hook is slow: two syncs of one parent at once would overlap at the
// hook. The new replicas take no shard while the leader holds its Lease;
// the leader, still running, steps down and releases it; then the members
// sync every parent, and the old leader none.
func TestSwitchingFromLeaderElectionToShardsSyncsNoParentTwiceAtOnce(t *testing.T) {
	// Sequential: restarts the server (restartWith) and starts replicas.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	modes, err := framework.ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	leaderD, _, _ := renderedDeployment(t, "")
	shardedD, _, _ := renderedDeployment(t, modes["sharded"])
	lo, err := framework.DeploymentOptions(leaderD)
	if err != nil {
		t.Fatal(err)
	}
	so, err := framework.DeploymentOptions(shardedD)
	if err != nil {
		t.Fatal(err)
	}
	lease := lo.LeaderElection
	if !lo.LeaderElect || so.Shards == 0 || so.LeaderElection.Name != lease.Name || so.LeaderElection.Namespace != lease.Namespace {
		t.Fatalf("the chart's default values run --leader-elect=%v with Lease %s/%s, its sharded values --shards=%d in group %s/%s: want a switch within one Lease name",
			lo.LeaderElect, lease.Namespace, lease.Name, so.Shards, so.LeaderElection.Namespace, so.LeaderElection.Name)
	}
	// The stack's own server, behind the APIService, is the old leader:
	// the chart's arguments without its certificates (the stack's serve).
	suite.RestartWith(t, framework.DeploymentServerArgs(leaderD)...)
	leader := suite.CompositeProcess()
	suite.Eventually(t, "the leader-elect replica holding the Lease", func() (bool, error) {
		holder, p, err := leaseHolder(ctx, lease.Namespace, lease.Name, leader)
		if err == nil && p != leader {
			err = fmt.Errorf("held by %q", holder)
		}
		return p == leader, err
	})

	rec := recordSlowCallers(t, hook.URL, 300*time.Millisecond, []*framework.Process{leader})
	ctrl := framework.HelloController{Name: "loop-modeswitch", HookURL: rec.url}
	ctrl.Create(t, suite)
	ns := suite.Namespace(t, "loop-modeswitch")
	const parents = 16
	generations := make([]int64, parents)
	for i := range generations {
		generations[i] = suite.CreateHello(t, ns, fmt.Sprintf("p%d", i), ctrl.Name, framework.HelloSpec("blue", "a")).GetGeneration()
	}
	for i, generation := range generations {
		suite.WaitObserved(t, ns, fmt.Sprintf("p%d", i), generation)
	}

	stopChurn := churn(ns, parents)
	defer stopChurn()
	var members []*framework.Process
	for i := 0; i < 2; i++ {
		m := suite.MustStartReplica(t, ctx, fmt.Sprintf("modeswitch-sharded-%d", i), framework.DeploymentServerArgs(shardedD)...)
		defer m.Stop(30 * time.Second)
		rec.add(m)
		members = append(members, m)
	}
	waitShardsSettled(t, lease.Name, so.Shards, len(members))
	// Fresh calls by each member, the parents still changing: the old
	// leader, had it gone on, would be syncing them too.
	settled := rec.parents(ns)
	suite.Within(t, "hook calls by each sharded replica since the shards settled", 3*time.Minute, func() (bool, error) {
		now := rec.parents(ns)
		for _, m := range members {
			if callsBy(now, m.Name) == callsBy(settled, m.Name) {
				return false, fmt.Errorf("none by %s", m.Name)
			}
		}
		return true, nil
	})
	stopChurn()
	if n := rec.overlapping(); n != 0 {
		t.Errorf("%d hook calls about a parent began while another about it was in flight, the leader's loop beside the sharded replicas'", n)
	}
	holder, p, err := leaseHolder(ctx, lease.Namespace, lease.Name, leader)
	if err != nil {
		t.Fatal(err)
	}
	if p == leader {
		t.Fatalf("the shards are held by the sharded replicas, and the Lease %s/%s still by the leader (%s), which did not step down", lease.Namespace, lease.Name, holder)
	}

	// What a user sees: every parent follows its spec, synced by the
	// members and no longer by the old leader, which still runs.
	before := rec.parents(ns)
	for i := 0; i < parents; i++ {
		name := fmt.Sprintf("p%d", i)
		suite.WaitObserved(t, ns, name, suite.SetHelloSpec(t, ns, name, framework.HelloSpec("green", "a", "b")))
	}
	after := rec.parents(ns)
	for parent, by := range after {
		if by[leader.Name] != before[parent][leader.Name] {
			t.Errorf("parent %s: %d hook calls by the leader after it stepped down", parent, by[leader.Name]-before[parent][leader.Name])
		}
		if by[members[0].Name]+by[members[1].Name] == before[parent][members[0].Name]+before[parent][members[1].Name] {
			t.Errorf("parent %s: no hook call by a sharded replica for its new spec", parent)
		}
	}
	if n := rec.overlapping(); n != 0 {
		t.Errorf("%d hook calls about a parent began while another about it was in flight", n)
	}
	if err := leader.UnexpectedExit(); err != nil {
		t.Errorf("the leader was to step down and go on serving: %v", err)
	}
}

// callsBy counts the calls by replica in byParent.
func callsBy(byParent map[string]map[string]int, replica string) int {
	n := 0
	for _, by := range byParent {
		n += by[replica]
	}
	return n
}

// churn changes the spec of one of parents p0…p<parents-1> of ns after
// another, every 100 ms, until stop is called: the loop always has
// something to sync.
func churn(ns string, parents int) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			patch := fmt.Sprintf(`{"spec":{"round":%d}}`, i)
			_, _ = suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Patch(context.Background(), fmt.Sprintf("p%d", i%parents), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	}()
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			close(done)
			<-finished
		}
	}
}
