// Package bench holds Go benchmarks of composite-apiserver on a real stack
// (etcd, kube-apiserver, kube-controller-manager and composite-apiserver
// registered as an APIService, all on 127.0.0.1, with an in-process Go hook
// served over HTTP), each against a baseline measured in the same run:
//
//   - BenchmarkDryRunSync (B1): throughput and latency of dry-run
//     compositecontrollers/<cc>/sync with an inline parent, straight to
//     composite-apiserver (as the aggregator: front-proxy certificate and
//     X-Remote-* headers) and through kube-apiserver, against a bare Go
//     client that encodes, POSTs and decodes the same hook request and
//     response the way the server does.
//   - BenchmarkLoopConvergence (B2): how fast the controller loop turns
//     freshly created parents into children and status, at each size of
//     -loop.parents, against a plain client-go program writing the same
//     objects to the same kube-apiserver, and against the same program
//     server-side-applying the children (the write the loop makes).
//   - BenchmarkConvergedResync (B3): a restart of composite-apiserver over
//     converged parents must call the hook once per parent and write no
//     child and no parent status; it fails otherwise.
//   - BenchmarkMemory (B4): heap bytes per cached child of the server
//     against a bare client-go dynamic informer holding the same objects.
//   - BenchmarkMemoryLimit (B8, only with -memlimit.parents): the server
//     restarted with the chart's memory limit converges that many parents;
//     its peak resident memory must stay below the limit.
//   - BenchmarkCRUD (B5): create, get and list of CompositeControllers
//     through kube-apiserver against the same objects served as a CRD by
//     the same kube-apiserver.
//   - BenchmarkIsolation (B6): how long a healthy controller's parents
//     take to converge while another controller's hook hangs for every one
//     of its parents, against the same without it.
//   - BenchmarkShards (B7, only with -shards.run): three replicas sharing
//     the loop with --shards against one replica in the same run: each
//     one's share of the parents, the sum of hook calls, overlapping calls
//     about a parent, and the takeover of a killed replica's parents.
//   - BenchmarkPodChildren (B10, only with -pods.parents, and alone: its
//     stack runs pods): B2's shape with Pods as children, from creating the
//     parents until all their Pods are Ready (kube-scheduler binds them,
//     kwok makes them Ready), against a plain client-go program creating
//     the same Pods, made Ready by the same stand-in, in the same run.
//   - BenchmarkRollout (B11, only with -rollout.parents): a change of a
//     controller's hook landed on that many converged parents in four
//     steps of spec.rollout, against the same change of another controller
//     over as many parents all at once, in the same run; and the loop's
//     convergence of fresh parents with spec.rollout set against without.
//
// The stack starts only when -bench selects one of these benchmarks, so
// `go test ./...` just compiles the package and runs its few unit tests.
// Run the benchmarks with hack/bench.sh, which prints one table of them
// with their baselines, or with
//
//	go test ./e2e/bench/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// Each benchmark reports its own metrics (ops/s or objects/s, p50-ms,
// p99-ms, ratios, writes, hook calls, bytes) and suppresses ns/op, which
// means nothing for fixed-size experiments; each also logs a summary line
// (shown by go test -bench without -v). Every benchmark but B1 runs one
// experiment per invocation whatever b.N is: use -benchtime 1x.
//
// Sizes and layouts are flags (below). composite-apiserver runs with its
// default flags unless -composite.workers or -composite.args say otherwise
// (e.g. "--target-qps=-1"), so that the figures are what a user gets.
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var (
	syncBareRequests   = flag.Int("sync.bare-requests", 2000, "BenchmarkDryRunSync: requests per iteration of the bare baseline")
	syncServerRequests = flag.Int("sync.server-requests", 800, "BenchmarkDryRunSync: requests per iteration through composite-apiserver (direct and through kube-apiserver)")
	syncConcurrency    = flag.Int("sync.concurrency", 8, "BenchmarkDryRunSync: concurrent requests")
	syncChildren       = flag.Int("sync.children", 10, "BenchmarkDryRunSync: ConfigMaps the hook returns per parent")
	syncCPUProfile     = flag.String("sync.cpuprofile", "", "BenchmarkDryRunSync: a directory to write composite-apiserver's CPU and allocation profiles to, of 10 s of direct and of through-kube-apiserver requests each, run after their measurements")
	syncServerDryRun   = flag.Bool("sync.server-dry-run", false, "BenchmarkDryRunSync: set spec.serverDryRun, so that the server dry-run applies every child to kube-apiserver instead of computing what it would store")

	loopParents         = intList{500, 2000}
	loopChildren        = flag.Int("loop.children", 10, "BenchmarkLoopConvergence: ConfigMaps per parent")
	loopPerNamespace    = flag.Int("loop.parents-per-namespace", 0, "BenchmarkLoopConvergence: parents per namespace; 0 puts them all in one")
	loopCreators        = flag.Int("loop.creators", 16, "BenchmarkLoopConvergence: workers creating the parents")
	loopBaselineWorkers = flag.Int("loop.baseline-workers", 32, "BenchmarkLoopConvergence: workers of the client-go baseline")
	loopCPUProfile      = flag.String("loop.cpuprofile", "", "BenchmarkLoopConvergence: a directory to write CPU profiles of each size's convergence to: kube-apiserver's of each baseline and of the loop, composite-apiserver's of the loop, its allocations over the same seconds (loop-N-allocs.pprof) and its heap at their end (loop-N-heap.pprof)")
	loopProfileSeconds  = flag.Int("loop.cpuprofile-seconds", 20, "BenchmarkLoopConvergence: how long the CPU profiles of -loop.cpuprofile last (both servers end a request after 60 s)")
	loopProfileAfter    = flag.Duration("loop.cpuprofile-after", 0, "BenchmarkLoopConvergence: how long into a phase the CPU profiles of -loop.cpuprofile start: what grows with the number of cached children shows late in a large phase")
	loopWatchChildren   = flag.Bool("loop.watch-children", false, "BenchmarkLoopConvergence: the benchmark also watches the children (their metadata), and a phase ends when the last child and the last parent status are seen; false: it watches the parents alone, whose status is written once their children's applies returned, and counts the children with a list after the phase is measured")
	loopPaced           = flag.Int("loop.paced", 100, "BenchmarkLoopConvergence: parents created one by one, loop.paced-rate a second, once the others converged: their p50 is the latency of a new parent among that many converged ones, without the queue of a burst")
	loopPacedRate       = flag.Float64("loop.paced-rate", 10, "BenchmarkLoopConvergence: parents a second of the paced measurement")
	identityRounds      = flag.Int("loop.identity-rounds", 2, "BenchmarkLoopConvergenceWithIdentity: rounds at the first -loop.parents size, each without and then with a per-controller identity")
	loopBaselineFirst   = flag.Bool("loop.baseline-first", true, "BenchmarkLoopConvergence: a loop variant run without the client-go baseline at its size measures that baseline first, on the same stack, for its ratio-vs-baseline; false: the variant alone, and no ratio (hack/bench.sh runs each phase of B2 on a stack of its own this way, and computes the ratios)")
	loopCleanPhases     = flag.Bool("loop.clean-phases", false, "BenchmarkLoopConvergence: each phase deletes its namespaces once measured and waits (up to 3 minutes) for the cluster to be quiet, so that no phase runs beside an earlier one's objects; the garbage collector's work after a deletion (about 10 owner lookups a second) may still reach the next phase")
	loopTimeout         = flag.Duration("loop.timeout", 4*time.Minute, "BenchmarkLoopConvergence: how long to wait for convergence at each size; when it passes, the rate so far is reported with converged=0")

	resyncParents      = flag.Int("resync.parents", 2000, "BenchmarkConvergedResync: converged parents")
	resyncChildren     = flag.Int("resync.children", 10, "BenchmarkConvergedResync: ConfigMaps per parent")
	resyncPerNamespace = flag.Int("resync.parents-per-namespace", 0, "BenchmarkConvergedResync: parents per namespace; 0 puts them all in one")
	resyncTimeout      = flag.Duration("resync.timeout", 4*time.Minute, "BenchmarkConvergedResync: how long to wait for the loop to converge the parents, and then for the restarted server to call the hook for every parent")

	memoryParents  = flag.Int("memory.parents", 500, "BenchmarkMemory: parents whose children the loop creates and caches")
	memoryChildren = flag.Int("memory.children", 10, "BenchmarkMemory: ConfigMaps per parent")
	memoryTimeout  = flag.Duration("memory.timeout", 4*time.Minute, "BenchmarkMemory: how long to wait for the loop to converge the parents")

	crudObjects     = flag.Int("crud.objects", 500, "BenchmarkCRUD: objects created, read and listed of each kind")
	crudLists       = flag.Int("crud.lists", 20, "BenchmarkCRUD: lists of all the objects of each kind, for the list time's median")
	crudConcurrency = flag.Int("crud.concurrency", 1, "BenchmarkCRUD: concurrent requests of creates and gets; 1 measures latency without queueing")
	crudLoop        = flag.Bool("crud.loop", false, "BenchmarkCRUD: keep the controller loop on; by default composite-apiserver is restarted with --controller-loop=false for it, so that starting a controller per created CompositeController does not share the 2 cores with the requests measured")

	isolationParents     = flag.Int("isolation.parents", 200, "BenchmarkIsolation: parents of the healthy controller (loop.children ConfigMaps each), converged without and with the hanging one")
	isolationHanging     = flag.Int("isolation.hanging", 200, "BenchmarkIsolation: parents of the controller whose hook hangs")
	isolationHookTimeout = flag.Duration("isolation.hook-timeout", 10*time.Second, "BenchmarkIsolation: the hanging hook's webhook timeout, how long each of its calls hangs")

	compositeWorkers = flag.Int("composite.workers", 0, "--workers of composite-apiserver; 0 keeps the server's default")
	compositeArgs    = flag.String("composite.args", "", "more flags of composite-apiserver, space-separated, e.g. \"--target-qps=-1\"")
)

func init() {
	flag.Var(&loopParents, "loop.parents", "BenchmarkLoopConvergence: parents, comma-separated; each size runs its baseline and the loop, and the last size reports its p50 against the first's")
}

// intList is a flag of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out intList
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// suite is the control plane shared by the package's benchmarks; nil when
// no benchmark runs.
var suite *framework.Suite

// env is what every benchmark shares once the stack is up.
var env *environment

// benchmarks are the package's benchmarks, for benchmarksWanted.
var benchmarks = []string{"BenchmarkDryRunSync", "BenchmarkLoopConvergence", "BenchmarkLoopConvergenceWithIdentity", "BenchmarkConvergedResync", "BenchmarkMemory", "BenchmarkMemoryLimit", "BenchmarkCRUD", "BenchmarkIsolation", "BenchmarkFleetPreview", "BenchmarkShards", "BenchmarkWriteCost"}

// benchmarksWanted tells whether the -bench pattern selects one of the
// package's benchmarks (by its first, top-level element) that the -skip
// pattern does not skip whole, so that `go test ./... -bench Other` does
// not start a stack here for nothing. B10 counts only with -pods.parents,
// B11 only with -rollout.parents: without it, each skips.
func benchmarksWanted(pattern, skip string) bool {
	if *podParents > 0 && matchesBenchmark(pattern, skip, podBenchmark) {
		return true
	}
	if *rolloutParents > 0 && matchesBenchmark(pattern, skip, rolloutBenchmark) {
		return true
	}
	return matchesBenchmark(pattern, skip, benchmarks...)
}

// matchesBenchmark tells whether the -bench pattern selects one of names
// and the -skip pattern does not skip it whole (a skip of one element, as
// hack/bench.sh gives, names whole benchmarks).
func matchesBenchmark(pattern, skip string, names ...string) bool {
	if pattern == "" {
		return false
	}
	top, _, _ := strings.Cut(pattern, "/")
	re, err := regexp.Compile(top)
	if err != nil {
		// Let the testing package report the bad pattern.
		return true
	}
	var skipped *regexp.Regexp
	if skip != "" && !strings.Contains(skip, "/") {
		if skipped, err = regexp.Compile(skip); err != nil {
			return true
		}
	}
	for _, name := range names {
		if re.MatchString(name) && (skipped == nil || !skipped.MatchString(name)) {
			return true
		}
	}
	return false
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || !benchmarksWanted(f.Value.String(), flag.Lookup("test.skip").Value.String()) {
		// No benchmark of this package asked for: nothing to start.
		os.Exit(m.Run())
	}
	opts, err := podStackOptions(flag.Lookup("test.bench").Value.String(), framework.Options{CompositeArgs: serverArgs()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	suite = framework.NewSuite(opts)
	os.Exit(suite.Main(m))
}

// serverArgs are the flags the benchmarks give composite-apiserver beyond
// what the stack needs: none unless asked, so that the figures are the
// defaults'.
func serverArgs() []string {
	var args []string
	if *compositeWorkers > 0 {
		args = append(args, fmt.Sprintf("--workers=%d", *compositeWorkers))
	}
	args = append(args, strings.Fields(*compositeArgs)...)
	fmt.Fprintf(os.Stderr, "bench: composite-apiserver flags beyond the stack's: %q\n", args)
	return args
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
			b.Logf("stack logs:\n%s", suite.LogTails(4000))
		}
	})
}
