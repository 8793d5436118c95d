package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkConvergedResync restarts composite-apiserver over
// resync.parents parents that the loop has converged (resync.children
// ConfigMaps each), which makes it sync every parent again, and checks
// that this resync calls the hook once per parent and writes nothing:
// kube-apiserver's apiserver_request_total for create, update, patch,
// apply and delete of configmaps and hellos (any subresource) must not
// move. It fails when anything was written.
func BenchmarkConvergedResync(b *testing.B) {
	setUp(b)
	ctx := context.Background()
	name := uniqueName("bench-resync")
	parents, children := *resyncParents, *resyncChildren
	l, hook, w := startMeasuredController(ctx, b, name, parents, *resyncPerNamespace)

	// Converge: the loop itself creates every child and status.
	start := time.Now()
	w.converge(ctx, b, name, l, parents, children, 16, *resyncTimeout, "resync.timeout")
	convergedIn := time.Since(start)
	// Let the syncs our own writes trigger run out.
	if err := quiesce(ctx, hook, 3*time.Second, *resyncTimeout); err != nil {
		b.Fatal(err)
	}
	b.Logf("resync: the loop converged %d parents (%s) × %d ConfigMaps in %.1f s (%d hook calls)", parents, l, children, convergedIn.Seconds(), hook.calls.Load())

	// Restart composite-apiserver: a new process lists every parent and
	// syncs each once.
	before, err := writeCounts(ctx, "configmaps", "hellos", "events")
	if err != nil {
		b.Fatal(err)
	}
	hook.reset()
	b.ResetTimer()
	restart := time.Now()
	if err := suite.StopComposite(); err != nil {
		b.Fatal(err)
	}
	stopped := time.Since(restart)
	if err := suite.StartComposite(ctx); err != nil {
		b.Fatal(err)
	}
	ready := time.Since(restart)
	deadline := time.Now().Add(*resyncTimeout)
	for hook.distinct() < parents {
		if time.Now().After(deadline) {
			b.Fatalf("after the restart the hook was called for %d of %d parents within -resync.timeout=%s", hook.distinct(), parents, *resyncTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resynced := time.Since(restart)
	b.StopTimer()
	// Writes may trail the hook calls: wait until nothing moves.
	if err := quiesce(ctx, hook, 3*time.Second, *resyncTimeout); err != nil {
		b.Fatal(err)
	}
	after, err := writeCounts(ctx, "configmaps", "hellos", "events")
	if err != nil {
		b.Fatal(err)
	}
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		b.Fatal(err)
	}
	writes, _ := diffCounts(before, after)
	childWrites := sumWhere(writes, "configmaps ")
	statusWrites := sumWhere(writes, "hellos/status ")
	// Writes of children and parents fail the benchmark; Events are
	// reported apart.
	eventWrites := sumWhere(writes, "events ")
	total := childWrites + sumWhere(writes, "hellos")
	calls := hook.calls.Load()
	syncing := resynced - ready
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total, "writes")
	b.ReportMetric(childWrites, "child-writes")
	b.ReportMetric(statusWrites, "status-writes")
	b.ReportMetric(float64(calls), "hook-calls")
	b.ReportMetric(eventWrites, "event-writes")
	b.ReportMetric(float64(parents)/syncing.Seconds(), "parents/s")
	b.ReportMetric(resynced.Seconds(), "resync-s")
	b.Logf("resync: restart (stop %.1f s, ready after %.1f s), then the hook was called for all %d parents %.1f s later (%.0f parents/s), %.1f s after the restart began; "+
		"%d hook calls; writes during the resync: %s",
		stopped.Seconds(), ready.Seconds(), parents, syncing.Seconds(), float64(parents)/syncing.Seconds(), resynced.Seconds(), calls, formatCounts(writes))
	if total > 0 {
		b.Fatalf("a resync of converged parents wrote %g times (%g to ConfigMaps, %g to hellos status): %s", total, childWrites, statusWrites, formatCounts(writes))
	}
	if calls != int64(parents) {
		b.Logf("resync: %d hook calls for %d parents: some parents were synced more than once", calls, parents)
	}
}

// quiesce waits until the hook has not been called for quiet, at most
// limit.
func quiesce(ctx context.Context, hook *hookStats, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, since := hook.calls.Load(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			return fmt.Errorf("the hook was still being called after %s", limit)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
		if n := hook.calls.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	return nil
}
