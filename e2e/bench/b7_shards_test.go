package bench

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

var (
	shardsRun      = flag.Bool("shards.run", false, "run BenchmarkShards (B7), which starts two more replicas and converges shards.parents parents twice: hack/bench.sh --b7")
	shardsParents  = flag.Int("shards.parents", 3000, "BenchmarkShards: parents, in one namespace, converged by one replica and then by three")
	shardsChildren = flag.Int("shards.children", 1, "BenchmarkShards: ConfigMaps per parent")
	shardsCount    = flag.Int("shards.shards", shard.DefaultShards, "BenchmarkShards: --shards of the three replicas")
	shardsLease    = flag.Duration("shards.lease-duration", 15*time.Second, "BenchmarkShards: --leader-elect-lease-duration of the three replicas (renew deadline 2/3 of it, retry period 2 s), the time a dead replica's parents wait")
	shardsTimeout  = flag.Duration("shards.timeout", 5*time.Minute, "BenchmarkShards: how long to wait for each convergence")
)

// BenchmarkShards (B7) runs shards.parents parents on one replica (the
// stack's composite-apiserver as configured) and then, in the same run, on
// three replicas sharing the loop with --shards, and reports each replica's
// share of the parents against a third, the sum of hook calls against one
// replica's, the hook calls about a parent that began while another about
// it was in flight, and each setting's live heap. Then it kills one of the
// three: how long until the others have called the hook about every one
// of its parents, against the lease duration, and the children lost or
// duplicated.
func BenchmarkShards(b *testing.B) {
	if !*shardsRun {
		b.Skip("B7 runs with -shards.run (hack/bench.sh --b7)")
	}
	setUp(b)
	ctx := context.Background()
	parents, children := *shardsParents, *shardsChildren

	var oneCalls int64
	b.Run("replicas=1", func(b *testing.B) {
		name := uniqueName("b7-one")
		st, _ := convergeShardBench(ctx, b, name, parents, children)
		oneCalls = st.calls.Load()
		// Before the namespace goes: its deletion syncs the parents again.
		byCalls := st.perParent()
		heap, err := serverHeap(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// The three replicas' heap is measured over the same number of
		// objects: these go first.
		if err := deleteNamespace(ctx, name+"-0", *shardsTimeout); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(oneCalls), "hook-calls")
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		b.Logf("one replica: %d parents, %d hook calls (parents by calls about them: %v), heap %.0f MiB", parents, oneCalls, byCalls, float64(heap)/(1<<20))
	})

	b.Run("replicas=3", func(b *testing.B) {
		group := uniqueName("b7")
		renew := *shardsLease * 2 / 3
		args := []string{fmt.Sprintf("--shards=%d", *shardsCount), "--leader-elect-lease-name=" + group,
			"--leader-elect-lease-duration=" + shardsLease.String(), "--leader-elect-renew-deadline=" + renew.String(),
			"--leader-elect-retry-period=2s"}
		if err := restartComposite(ctx, args...); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := restartComposite(ctx); err != nil {
				b.Error(err)
			}
		})
		var replicas []*framework.Process
		for _, name := range []string{"replica-b", "replica-c"} {
			p, err := suite.StartReplica(ctx, name, args...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Stop(30 * time.Second) })
			replicas = append(replicas, p)
		}
		a, victim, survivor := suite.CompositeProcess(), replicas[0], replicas[1]
		procs := []*framework.Process{a, victim, survivor}
		if err := waitShardsSettled(ctx, group, len(procs)); err != nil {
			b.Fatal(err)
		}

		name := uniqueName("b7-three")
		env.hook.register(name)
		env.hook.of(name).attribute(procs...)
		st, w := convergeShardBench(ctx, b, name, parents, children)
		calls := st.calls.Load()
		share := map[string]int{}
		owners := map[string]string{}
		shared := 0
		for parent, by := range st.callersOf() {
			if len(by) != 1 {
				if shared++; shared <= 5 {
					b.Logf("parent %s (shard %d): hook calls by %v", parent, shard.Of(parent, *shardsCount), by)
				}
				continue
			}
			for replica := range by {
				share[replica]++
				owners[parent] = replica
			}
		}
		third := float64(parents) / 3
		lo, hi := 2.0, 0.0
		for _, p := range procs {
			r := float64(share[p.Name]) / third
			lo, hi = min(lo, r), max(hi, r)
		}
		heap, err := serverHeap(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(lo, "share-min-of-third")
		b.ReportMetric(hi, "share-max-of-third")
		b.ReportMetric(float64(calls), "hook-calls")
		if oneCalls > 0 {
			b.ReportMetric(float64(calls)/float64(oneCalls), "hook-calls-vs-one")
		}
		b.ReportMetric(float64(st.overlapping()), "overlaps")
		b.ReportMetric(float64(shared), "parents-on-two-replicas")
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		b.Logf("three replicas: parents synced by each %v (%.2f–%.2f of a third), %d by more than one; %d hook calls (%.2f× one replica's %d; parents by calls about them: %v); %d overlapping calls; heap of one replica %.0f MiB",
			share, lo, hi, shared, calls, float64(calls)/float64(max(oneCalls, 1)), oneCalls, st.perParent(), st.overlapping(), float64(heap)/(1<<20))

		// One replica dies: the others call the hook about each of its
		// parents once its Leases expire.
		var victims []string
		for parent, owner := range owners {
			if owner == victim.Name {
				victims = append(victims, parent)
			}
		}
		if len(victims) == 0 {
			b.Fatalf("%s synced no parent of its own: nothing to take over", victim.Name)
		}
		before := st.callersOf()
		victim.Kill()
		killed := time.Now()
		var takeover time.Duration
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, *shardsTimeout, true, func(context.Context) (bool, error) {
			after := st.callersOf()
			for _, parent := range victims {
				if after[parent][a.Name]+after[parent][survivor.Name] == before[parent][a.Name]+before[parent][survivor.Name] {
					return false, nil
				}
			}
			takeover = time.Since(killed)
			return true, nil
		})
		if err != nil {
			b.Fatalf("the others did not sync all of %s's %d parents within %s", victim.Name, len(victims), *shardsTimeout)
		}
		if err := quiesce(ctx, st, 3*time.Second, *shardsTimeout); err != nil {
			b.Fatal(err)
		}
		cms, err := env.kube.CoreV1().ConfigMaps(name+"-0").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		owned := 0
		for _, cm := range cms.Items {
			if metav1.GetControllerOfNoCopy(&cm) != nil && strings.HasPrefix(cm.Name, "p") {
				owned++
			}
		}
		_, seen, _ := w.progress()
		b.ReportMetric(takeover.Seconds(), "takeover-s")
		b.ReportMetric(takeover.Seconds()/shardsLease.Seconds(), "takeover-vs-lease")
		b.ReportMetric(float64(parents*children-owned), "children-lost")
		b.ReportMetric(float64(max(owned-parents*children, 0)), "children-extra")
		b.ReportMetric(float64(st.overlapping()), "overlaps-after-kill")
		b.Logf("%s killed: its %d parents synced again by the others after %s (lease %s, %.2f×); %d of %d children present (%d seen by the watch); %d overlapping calls in all",
			victim.Name, len(victims), takeover.Round(100*time.Millisecond), shardsLease, takeover.Seconds()/shardsLease.Seconds(),
			owned, parents*children, seen, st.overlapping())
	})
}

// convergeShardBench creates the controller name and its parents in one
// namespace, and waits until they converged and the hook is idle.
func convergeShardBench(ctx context.Context, b *testing.B, name string, parents, children int) (*hookStats, *watcher) {
	b.Helper()
	l, st, w := startMeasuredController(ctx, b, name, parents, 0)
	w.converge(ctx, b, name, l, parents, children, *loopCreators, *shardsTimeout, "")
	if err := quiesce(ctx, st, 3*time.Second, *shardsTimeout); err != nil {
		b.Fatal(err)
	}
	return st, w
}

// waitShardsSettled waits until every shard of group is held, each of
// replicas holding its share.
func waitShardsSettled(ctx context.Context, group string, replicas int) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoordinationV1().Leases(framework.CompositeNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{shard.GroupLabel: group, shard.RoleLabel: "shard"}).String(),
		})
		if err != nil {
			return false, nil
		}
		held := map[string]int{}
		for _, l := range list.Items {
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				held[*h]++
			}
		}
		last = fmt.Sprint(held)
		total := 0
		for _, n := range held {
			if n < *shardsCount/replicas || n > *shardsCount/replicas+1 {
				return false, nil
			}
			total += n
		}
		return len(held) == replicas && total == *shardsCount, nil
	})
	if err != nil {
		return fmt.Errorf("the shards of %s did not settle on %d replicas (holders: %s): %w", group, replicas, last, err)
	}
	return nil
}

// deleteNamespace deletes ns and waits until it is gone, with everything
// in it.
func deleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	if err := env.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
