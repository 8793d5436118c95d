package bench

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/cmd/server"
)

var (
	memLimitParents  = flag.Int("memlimit.parents", 0, "BenchmarkMemoryLimit: parents converged by a server run with the chart's memory limit; 0 skips B8 (hack/bench.sh runs it with --b8, 10,000 parents)")
	memLimitChildren = flag.Int("memlimit.children", 10, "BenchmarkMemoryLimit: ConfigMaps per parent")
	memLimitValues   = flag.String("memlimit.values", "", "BenchmarkMemoryLimit: a values file to render the chart with (e.g. a row of the README's sizing table); empty: the chart's defaults")
	memLimitTimeout  = flag.Duration("memlimit.timeout", 20*time.Minute, "BenchmarkMemoryLimit: how long to wait for the loop to converge the parents")
)

// BenchmarkMemoryLimit (B8) proves the chart's memory limit: it renders
// the chart (its default values, or -memlimit.values), restarts
// composite-apiserver in the environment the kubelet would give that
// Deployment's container ($COMPOSITE_MEMORY_LIMIT from its limits.memory),
// checks that the server runs with the Go memory limit that implies, and
// has the loop converge memlimit.parents × memlimit.children ConfigMaps in
// one namespace. It fails when the server's peak resident memory (VmHWM:
// the kernel's own high-water mark, not a sample) passes the container's
// limit: in a pod the kernel would have killed it.
//
// It also measures what sizing needs: the live heap (after a GC) before
// the parents and after they converged, so the cost per cached child, and
// the server's CPU while it converged (the price of a garbage collector
// held to the limit).
func BenchmarkMemoryLimit(b *testing.B) {
	if *memLimitParents <= 0 {
		b.Skip("-memlimit.parents=0")
	}
	setUp(b)
	ctx := context.Background()
	limit, soft := restartWithChartMemoryLimit(ctx, b)
	pid := suite.CompositeProcess().Pid()

	name := uniqueName("bench-memlimit")
	parents, children := *memLimitParents, *memLimitChildren
	l, hook, w, before := startWarmController(ctx, b, name, parents, *memLimitTimeout)
	cpuBefore := compositeCPU(b)
	start := time.Now()
	w.converge(ctx, b, name, l, parents, children, *loopCreators, *memLimitTimeout, "memlimit.timeout")
	convergedIn := time.Since(start)
	cpu := compositeCPU(b) - cpuBefore
	w.close()
	if err := quiesce(ctx, hook, 3*time.Second, *memLimitTimeout); err != nil {
		b.Fatal(err)
	}
	peak, err := procStatusBytes(pid, "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	rss, err := residentBytes(pid)
	if err != nil {
		b.Fatal(err)
	}
	after, err := serverHeap(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cached := parents * children
	perChild := (float64(after) - float64(before)) / float64(cached)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(int64(peak)), "peak-rss-MiB")
	b.ReportMetric(mib(limit), "limit-MiB")
	b.ReportMetric(mib(soft), "gomemlimit-MiB")
	b.ReportMetric(float64(peak)/float64(limit), "peak-vs-limit")
	b.ReportMetric(mib(int64(rss)), "rss-converged-MiB")
	b.ReportMetric(mib(int64(before)), "heap-before-MiB")
	b.ReportMetric(mib(int64(after)), "heap-after-MiB")
	b.ReportMetric(perChild, "heap-B/child")
	b.ReportMetric(convergedIn.Seconds(), "converged-s")
	b.ReportMetric(float64(parents*(children+1))/convergedIn.Seconds(), "objects/s")
	b.ReportMetric(cpu*1000/float64(parents*(children+1)), "server-cpu-ms/object")
	b.ReportMetric(float64(parents), "parents")
	b.Logf("memory limit: %d parents × %d ConfigMaps converged in %.1f s (%.0f objects/s, composite-apiserver %.2f ms CPU per object) by a server with the chart's memory limit of %.0f MiB (Go memory limit %.0f MiB); "+
		"its peak RSS %.0f MiB (%.2f of the limit), %.0f MiB once converged; live heap %.0f MiB before the parents, %.0f MiB after: %.0f bytes per child",
		parents, children, convergedIn.Seconds(), float64(parents*(children+1))/convergedIn.Seconds(), cpu*1000/float64(parents*(children+1)), mib(limit), mib(soft),
		mib(int64(peak)), float64(peak)/float64(limit), mib(int64(rss)), mib(int64(before)), mib(int64(after)), perChild)
	if int64(peak) > limit {
		b.Fatalf("composite-apiserver's peak RSS, %.0f MiB, passed the chart's memory limit of %.0f MiB: in a pod it would have been OOM-killed", mib(int64(peak)), mib(limit))
	}
}

// restartWithChartMemoryLimit restarts composite-apiserver with the
// memory limit the chart's Deployment gives its container (in the
// environment the kubelet would set from the rendered env), checks the Go
// memory limit it runs with, and returns the container's limit and that Go
// limit. The server is restarted again in the benchmarks' own environment
// when b ends, for the benchmarks after it.
func restartWithChartMemoryLimit(ctx context.Context, b *testing.B) (limit, soft int64) {
	d, err := framework.ChartDeployment(framework.CompositeNamespace, *memLimitValues)
	if err != nil {
		b.Fatal(err)
	}
	q := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory()
	if q.IsZero() {
		b.Fatalf("the chart's Deployment sets no memory limit")
	}
	value, err := framework.ContainerEnvVar(d, server.MemoryLimitEnv)
	if err != nil {
		b.Fatal(err)
	}
	o, err := framework.DeploymentOptions(d)
	if err != nil {
		b.Fatal(err)
	}
	limit, soft = q.Value(), int64(float64(q.Value())*o.MemoryLimitRatio)

	// A restart that kube-apiserver's aggregator has not seen yet breaks
	// the next kubectl: once it notices, it keeps the group version in
	// discovery with no resources until it has fetched the new process's
	// ("no matches for kind CompositeController"). So each restart waits
	// for the APIService to go unavailable, to come back, and for
	// discovery to list the resources again, as a user would.
	restart := func() {
		if err := suite.StopComposite(); err != nil {
			b.Fatal(err)
		}
		if err := suite.WaitAPIServiceAvailable(ctx, false); err != nil {
			b.Fatal(err)
		}
		if err := suite.StartComposite(ctx); err != nil {
			b.Fatal(err)
		}
		if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
			b.Fatal(err)
		}
		if err := suite.WaitDiscovered(ctx); err != nil {
			b.Fatal(err)
		}
		if err := suite.WaitAuthenticatedRequests(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Registered before Setenv: cleanups run last first, so this one
	// runs once the environment is back.
	b.Cleanup(restart)
	b.Setenv("GOMEMLIMIT", "")
	b.Setenv(server.MemoryLimitEnv, value)
	restart()

	// A restarted server answers the aggregator's requests as anonymous
	// until it has read the front-proxy CA from kube-system's
	// extension-apiserver-authentication: ask until it has.
	var got int64
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, lastErr = serverGoMemoryLimit(ctx)
		return lastErr == nil, nil
	}); err != nil {
		b.Fatalf("composite-apiserver's /metrics after its restart: %v (%v)", lastErr, err)
	}
	if got != soft {
		b.Fatalf("composite-apiserver runs with a Go memory limit of %d bytes, want %d: %.2f of the chart's limit %s ($%s=%s)", got, soft, o.MemoryLimitRatio, q, server.MemoryLimitEnv, value)
	}
	return limit, soft
}

// serverGoMemoryLimit is go_gc_gomemlimit_bytes of composite-apiserver's
// /metrics: the Go runtime's soft memory limit it runs with.
func serverGoMemoryLimit(ctx context.Context) (int64, error) {
	data, err := serverGet(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("composite-apiserver's /metrics has no go_gc_gomemlimit_bytes")
}
