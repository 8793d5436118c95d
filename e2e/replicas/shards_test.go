package replicas

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

const (
	shardGroup   = "e2e-shards"
	shardCount   = shard.DefaultShards
	shardLease   = 8 * time.Second
	shardParents = 600
)

// shardArgs run a replica in the group of this file's tests, with Leases
// short enough for a test, and a renew deadline long enough that a
// replica on a machine shared with other tests does not miss it (it would
// give its shards up, and their parents would be synced by two replicas
// one after the other).
var shardArgs = []string{
	fmt.Sprintf("--shards=%d", shardCount), "--leader-elect-lease-name=" + shardGroup,
	"--leader-elect-lease-duration=" + shardLease.String(), "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s",
}

// TestShardedReplicasSyncEachParentOnOneReplica runs three replicas with
// --shards (the stack's own composite-apiserver, behind the APIService, and
// two more) and 600 parents: every parent converges, each replica's hook
// calls are about a third of the parents (within 20%) and each parent's
// about one replica's, and no call about a parent starts while another
// about it is in flight. Killing one replica hands its parents to the
// others, which call the hook about every one of them again and converge
// a new spec of theirs, with no ConfigMap lost or duplicated.
func TestShardedReplicasSyncEachParentOnOneReplica(t *testing.T) {
	// Sequential: restarts the server (restartWith) and starts replicas.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	suite.RestartWith(t, shardArgs...)
	b := suite.MustStartReplica(t, ctx, "replica-b", shardArgs...)
	defer b.Stop(30 * time.Second)
	c := suite.MustStartReplica(t, ctx, "replica-c", shardArgs...)
	defer c.Stop(30 * time.Second)
	a := suite.CompositeProcess()
	procs := []*framework.Process{a, b, c}
	waitShardsSettled(t, shardGroup, shardCount, 3)
	for _, p := range procs {
		suite.Eventually(t, p.Name+"'s /metrics showing its share of the shards", func() (bool, error) {
			n, err := metricOf(p, "composite_controller_shards_owned", "")
			return n == shardCount/3 || n == shardCount/3+1, err
		})
	}

	rec := recordCallers(t, hook.URL, procs)
	ctrl := framework.HelloController{Name: "loop-shards", HookURL: rec.url}
	ctrl.Create(t, suite)
	ns := suite.Namespace(t, "loop-shards")
	for i := 0; i < shardParents; i++ {
		suite.CreateHello(t, ns, fmt.Sprintf("p-%d", i), ctrl.Name, framework.HelloSpec("blue", "a"))
	}
	waitShardedConverged(t, ns, nil)

	owners := onlyCaller(t, rec.parents(ns))
	share := map[string]int{}
	for _, owner := range owners {
		share[owner]++
	}
	third := float64(shardParents) / 3
	for _, p := range procs {
		if r := float64(share[p.Name]) / third; r < 0.8 || r > 1.2 {
			t.Errorf("%s synced %d of %d parents, %.2f of a third: want within 20%%", p.Name, share[p.Name], shardParents, r)
		}
	}
	t.Logf("parents synced by each replica: %v", share)
	if n := rec.overlapping(); n != 0 {
		t.Errorf("%d hook calls about a parent began while another about it was in flight", n)
	}

	// b dies: the others take its shards once its Leases expire, and
	// call the hook about each of its parents again, unasked.
	var victims []string
	for parent, owner := range owners {
		if owner == b.Name {
			victims = append(victims, parent)
		}
	}
	sort.Strings(victims)
	if len(victims) == 0 {
		t.Fatalf("%s synced no parent of its own: nothing to take over", b.Name)
	}
	before := rec.parents(ns)
	b.Kill()
	killed := time.Now()
	suite.Eventually(t, fmt.Sprintf("a hook call by a or c about each of b's %d parents", len(victims)), func() (bool, error) {
		after := rec.parents(ns)
		for _, parent := range victims {
			if after[parent][a.Name]+after[parent][c.Name] == before[parent][a.Name]+before[parent][c.Name] {
				return false, fmt.Errorf("no call about %s since b died", parent)
			}
		}
		return true, nil
	})
	t.Logf("b's %d parents synced again by the others %s after it was killed (Leases of %s, renewed every second)",
		len(victims), time.Since(killed).Round(100*time.Millisecond), shardLease)

	// What a user sees: b's parents follow their spec again.
	changed := map[string]bool{}
	for _, parent := range victims {
		name := parent[len(ns)+1:]
		suite.SetHelloSpec(t, ns, name, framework.HelloSpec("green", "a", "b"))
		changed[name] = true
	}
	waitShardedConverged(t, ns, changed)
	if n := rec.overlapping(); n != 0 {
		t.Errorf("%d hook calls about a parent began while another about it was in flight", n)
	}
}

// waitShardsSettled waits until the shards of group are all held, by
// replicas live members each holding their share.
func waitShardsSettled(t *testing.T, group string, shardCount, replicas int) {
	t.Helper()
	suite.Eventually(t, fmt.Sprintf("%d shards of %s held by %d replicas, evenly", shardCount, group, replicas), func() (bool, error) {
		list, err := suite.Kube.CoordinationV1().Leases(framework.CompositeNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{shard.GroupLabel: group, shard.RoleLabel: "shard"}).String(),
		})
		if err != nil {
			return false, err
		}
		held := map[string]int{}
		for _, l := range list.Items {
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				held[*h]++
			}
		}
		if len(held) != replicas {
			return false, fmt.Errorf("holders %v", held)
		}
		total := 0
		for _, n := range held {
			if n < shardCount/replicas || n > shardCount/replicas+1 {
				return false, fmt.Errorf("holders %v", held)
			}
			total += n
		}
		return total == shardCount, nil
	})
}

// waitShardedConverged waits until every parent of ns has its current
// generation observed and exactly its ConfigMaps, owned by it: <name>-a,
// and <name>-b for those in withB.
func waitShardedConverged(t *testing.T, ns string, withB map[string]bool) {
	t.Helper()
	suite.Within(t, fmt.Sprintf("%d parents converged", shardParents), 5*time.Minute, func() (bool, error) {
		list, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(list.Items) != shardParents {
			return false, fmt.Errorf("%d parents", len(list.Items))
		}
		want := map[string]string{}
		for _, p := range list.Items {
			if got, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration"); got != p.GetGeneration() {
				return false, fmt.Errorf("parent %s: observedGeneration %d of %d", p.GetName(), got, p.GetGeneration())
			}
			want[p.GetName()+"-a"] = string(p.GetUID())
			if withB[p.GetName()] {
				want[p.GetName()+"-b"] = string(p.GetUID())
			}
		}
		cms := suite.ConfigMaps(t, ns)
		for name, uid := range want {
			cm, ok := cms[name]
			if !ok {
				return false, fmt.Errorf("ConfigMap %s missing", name)
			}
			if ref := metav1.GetControllerOf(&cm); ref == nil || string(ref.UID) != uid {
				return false, fmt.Errorf("ConfigMap %s not controlled by its parent", name)
			}
		}
		if len(cms) != len(want) {
			return false, fmt.Errorf("%d ConfigMaps, want %d", len(cms), len(want))
		}
		return true, nil
	})
}

// onlyCaller is the one replica that called the hook about each parent;
// it fails t for a parent two replicas called about, or one nobody knows.
func onlyCaller(t *testing.T, byParent map[string]map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for parent, by := range byParent {
		if len(by) != 1 {
			t.Errorf("parent %s: hook calls by %v, want by one replica", parent, by)
			continue
		}
		for name := range by {
			out[parent] = name
		}
	}
	return out
}
