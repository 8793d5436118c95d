// Package bench holds Go benchmarks of composite-apiserver on a real stack
// (etcd, kube-apiserver, kube-controller-manager and composite-apiserver
// registered as an APIService, all on 127.0.0.1, with an in-process Go hook
// served over HTTP), each against a baseline measured in the same run:
//
//   - BenchmarkDryRunSync: throughput and latency of dry-run
//     compositecontrollers/<cc>/sync with an inline parent, straight to
//     composite-apiserver (as the aggregator: front-proxy certificate and
//     X-Remote-* headers) and through kube-apiserver, against a bare Go
//     client that encodes, POSTs and decodes the same hook request and
//     response the way the server does.
//   - BenchmarkLoopConvergence: how fast the controller loop turns freshly
//     created parents into children and status, against a plain client-go
//     program writing the same objects to the same kube-apiserver.
//   - BenchmarkConvergedResync: a restart of composite-apiserver over
//     converged parents must call the hook once per parent and write no
//     child and no parent status; it fails otherwise.
//
// The stack starts only when -bench selects one of these benchmarks, so
// `go test ./...` just compiles the package and runs its few unit tests.
// Run the benchmarks with
//
//	go test ./e2e/bench/ -run '^$' -bench . -benchtime 1x
//
// Each benchmark reports its own metrics (ops/s or objects/s, p50-ms,
// p99-ms, ratios, writes, hook calls) and suppresses ns/op, which means
// nothing for fixed-size experiments; each also logs a summary line (shown
// by go test -bench without -v). The loop and resync benchmarks run one
// experiment per invocation whatever b.N is: use -benchtime 1x.
//
// Sizes and layouts are flags (below). Parents may be spread over
// namespaces: the resync benchmark puts each parent in a namespace of its
// own by default, because a parent's sync currently reports every child of
// every other parent of its namespace as a "foreign" object with one Event
// each, which makes a resync of many parents in one namespace quadratic
// (see -resync.parents-per-namespace=0). -composite.args passes flags to
// composite-apiserver, e.g. "--target-qps=-1" to lift the rate limit of
// its client of the target cluster.
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var (
	syncBareRequests   = flag.Int("sync.bare-requests", 2000, "BenchmarkDryRunSync: requests per iteration of the bare baseline")
	syncServerRequests = flag.Int("sync.server-requests", 160, "BenchmarkDryRunSync: requests per iteration through composite-apiserver (direct and through kube-apiserver)")
	syncConcurrency    = flag.Int("sync.concurrency", 8, "BenchmarkDryRunSync: concurrent requests")
	syncChildren       = flag.Int("sync.children", 10, "BenchmarkDryRunSync: ConfigMaps the hook returns per parent")

	loopParents         = flag.Int("loop.parents", 500, "BenchmarkLoopConvergence: parents")
	loopChildren        = flag.Int("loop.children", 10, "BenchmarkLoopConvergence: ConfigMaps per parent")
	loopPerNamespace    = flag.Int("loop.parents-per-namespace", 0, "BenchmarkLoopConvergence: parents per namespace; 0 puts them all in one")
	loopCreators        = flag.Int("loop.creators", 16, "BenchmarkLoopConvergence: workers creating the parents")
	loopBaselineWorkers = flag.Int("loop.baseline-workers", 32, "BenchmarkLoopConvergence: workers of the client-go baseline")
	loopTimeout         = flag.Duration("loop.timeout", 4*time.Minute, "BenchmarkLoopConvergence: how long to wait for convergence; when it passes, the rate so far is reported with converged=0")

	resyncParents      = flag.Int("resync.parents", 1000, "BenchmarkConvergedResync: converged parents")
	resyncChildren     = flag.Int("resync.children", 10, "BenchmarkConvergedResync: ConfigMaps per parent")
	resyncPerNamespace = flag.Int("resync.parents-per-namespace", 1, "BenchmarkConvergedResync: parents per namespace; 0 puts them all in one")
	resyncTimeout      = flag.Duration("resync.timeout", 3*time.Minute, "BenchmarkConvergedResync: how long to wait for the controller to call the hook for every parent")

	compositeWorkers = flag.Int("composite.workers", 16, "--workers of composite-apiserver")
	compositeArgs    = flag.String("composite.args", "", "more flags of composite-apiserver, space-separated, e.g. \"--target-qps=-1\"")
)

// stack is the control plane shared by the package's benchmarks; nil when
// no benchmark runs.
var stack *framework.Stack

// env is what every benchmark shares once the stack is up.
var env *environment

// benchmarks are the package's benchmarks, for benchmarksWanted.
var benchmarks = []string{"BenchmarkDryRunSync", "BenchmarkLoopConvergence", "BenchmarkConvergedResync"}

// benchmarksWanted tells whether the -bench pattern selects one of the
// package's benchmarks (by its first, top-level element), so that
// `go test ./... -bench Other` does not start a stack here for nothing.
func benchmarksWanted(pattern string) bool {
	if pattern == "" {
		return false
	}
	top, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(top)
	if err != nil {
		// Let the testing package report the bad pattern.
		return true
	}
	for _, name := range benchmarks {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || !benchmarksWanted(f.Value.String()) {
		// No benchmark of this package asked for: nothing to start.
		os.Exit(m.Run())
	}
	args := append([]string{fmt.Sprintf("--workers=%d", *compositeWorkers)}, strings.Fields(*compositeArgs)...)
	fmt.Fprintf(os.Stderr, "bench: composite-apiserver %s\n", strings.Join(args, " "))
	os.Exit(framework.TestMain(m, framework.Options{CompositeArgs: args}, &stack))
}

var (
	envOnce sync.Once
	envErr  error
)

// setUp prepares, once, what every benchmark shares, and prints the
// stack's logs when b fails.
func setUp(b *testing.B) {
	b.Helper()
	envOnce.Do(func() { env, envErr = newEnvironment(context.Background()) })
	if envErr != nil {
		b.Fatal(envErr)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("stack logs:\n%s", stack.LogTails(4000))
		}
	})
}
