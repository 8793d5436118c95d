// Package bench holds Go benchmarks of composite-apiserver on a real stack
// (etcd, kube-apiserver, kube-controller-manager and composite-apiserver
// registered as an APIService, all on 127.0.0.1), each against a baseline
// measured in the same run:
//
//   - BenchmarkDryRunSync: throughput and latency of dry-run
//     compositecontrollers/<cc>/sync with an inline parent, straight to
//     composite-apiserver and through kube-apiserver, against a bare Go
//     client calling the same hook the way the server does.
//   - BenchmarkLoopConvergence: how fast the controller loop turns freshly
//     created parents into children and status, against a plain client-go
//     program writing the same objects.
//   - BenchmarkConvergedResync: a restart of composite-apiserver over
//     converged parents must call every hook once and write nothing.
//
// The stack starts only when benchmarks were asked for (-bench), so
// `go test ./...` just compiles the package. Run it with
//
//	go test ./e2e/bench/ -run '^$' -bench . -benchtime 1x
//
// Each benchmark reports its own metrics (ops/s or objects/s, p50-ms,
// p99-ms, ratios) and suppresses ns/op, which is meaningless for fixed-size
// experiments. The sizes are flags (see the flag definitions below), e.g.
// -loop.timeout=30m lets the loop benchmark run to convergence.
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var (
	syncBareRequests   = flag.Int("sync.bare-requests", 2000, "BenchmarkDryRunSync: requests per iteration of the bare baseline")
	syncServerRequests = flag.Int("sync.server-requests", 24, "BenchmarkDryRunSync: requests per iteration through composite-apiserver (direct and through kube-apiserver)")
	syncConcurrency    = flag.Int("sync.concurrency", 8, "BenchmarkDryRunSync: concurrent requests")
	syncChildren       = flag.Int("sync.children", 10, "BenchmarkDryRunSync: ConfigMaps the hook returns per parent")

	loopParents         = flag.Int("loop.parents", 500, "BenchmarkLoopConvergence: parents")
	loopChildren        = flag.Int("loop.children", 10, "BenchmarkLoopConvergence: ConfigMaps per parent")
	loopCreators        = flag.Int("loop.creators", 16, "BenchmarkLoopConvergence: workers creating the parents")
	loopBaselineWorkers = flag.Int("loop.baseline-workers", 32, "BenchmarkLoopConvergence: workers of the client-go baseline")
	loopTimeout         = flag.Duration("loop.timeout", 4*time.Minute, "BenchmarkLoopConvergence: how long to wait for convergence; when it passes, the rate so far is reported with converged=0")

	resyncParents  = flag.Int("resync.parents", 1000, "BenchmarkConvergedResync: converged parents")
	resyncChildren = flag.Int("resync.children", 10, "BenchmarkConvergedResync: ConfigMaps per parent")
	resyncTimeout  = flag.Duration("resync.timeout", 3*time.Minute, "BenchmarkConvergedResync: how long to wait for the controller to call the hook for every parent")

	compositeWorkers = flag.Int("composite.workers", 16, "--workers of composite-apiserver")
)

// stack is the control plane shared by the package's benchmarks; nil when
// no benchmark runs.
var stack *framework.Stack

// env is what every benchmark shares once the stack is up.
var env *environment

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// No benchmark asked for: nothing to start.
		return m.Run()
	}
	// An interrupt still tears the stack down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	stack, err = framework.Start(ctx, framework.Options{
		Log:           os.Stderr,
		CompositeArgs: []string{fmt.Sprintf("--workers=%d", *compositeWorkers)},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "can't start the benchmark stack: %v\n", err)
		return 1
	}
	code := 1
	defer func() {
		if env != nil {
			env.close()
		}
		stack.Stop()
		// Keep certificates, data and logs of a failed run for a look.
		if code == 0 {
			os.RemoveAll(stack.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "benchmark stack files kept in %s\n", stack.Dir)
		}
	}()
	if env, err = newEnvironment(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "can't set the benchmarks up: %v\n%s", err, stack.LogTails(4000))
		return 1
	}
	done := make(chan int, 1)
	go func() { done <- m.Run() }()
	select {
	case code = <-done:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "interrupted: stopping the benchmark stack")
	}
	return code
}
