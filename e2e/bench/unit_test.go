package bench

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// The helpers run in every `go test ./...`, without a stack.

func TestBenchmarksWanted(t *testing.T) {
	for pattern, want := range map[string]bool{
		"":                          false,
		".":                         true,
		"DryRunSync":                true,
		"DryRunSync/direct":         true,
		"Loop|Resync":               true,
		"BenchmarkSomethingElse":    false,
		"SomethingElse/DryRunSync":  false,
		"ConvergedResync$":          true,
		"^BenchmarkLoopConvergence": true,
		"Memory":                    true,
		"CRUD":                      true,
		"Isolation":                 true,
		"Shards":                    true,
		// B10 only with -pods.parents: it skips without.
		"PodChildren": false,
	} {
		if got := benchmarksWanted(pattern, ""); got != want {
			t.Errorf("benchmarksWanted(%q) = %v, want %v", pattern, got, want)
		}
	}
}

// hack/bench.sh runs B2's phases each alone and the rest with -skip
// '^BenchmarkLoopConvergence$': a stack only when something is left.
func TestBenchmarksWantedWithSkip(t *testing.T) {
	for _, c := range []struct {
		pattern, skip string
		want          bool
	}{
		{"LoopConvergence$", "^BenchmarkLoopConvergence$", false},
		{".", "^BenchmarkLoopConvergence$", true},
		{"LoopConvergence", "^BenchmarkLoopConvergence$", true}, // WithIdentity
		// A skip of sub-benchmarks skips no benchmark whole.
		{"LoopConvergence$", "^BenchmarkLoopConvergence$/parents=500", true},
	} {
		if got := benchmarksWanted(c.pattern, c.skip); got != c.want {
			t.Errorf("benchmarksWanted(%q, %q) = %v, want %v", c.pattern, c.skip, got, c.want)
		}
	}
}

func TestParseSample(t *testing.T) {
	labels, value, err := parseSample(`{code="201",component="apiserver",dry_run="",group="example.com",resource="hellos",scope="resource",subresource="status",verb="PUT",version="v1",x="a\"b"} 42`)
	if err != nil {
		t.Fatal(err)
	}
	if value != 42 || labels["resource"] != "hellos" || labels["subresource"] != "status" || labels["verb"] != "PUT" || labels["dry_run"] != "" || labels["x"] != `a"b` {
		t.Errorf("got %v %v", labels, value)
	}
	for _, bad := range []string{`42`, `{a="b" 42`, `{a=b} 42`, `{a="b"}`} {
		if _, _, err := parseSample(bad); err == nil {
			t.Errorf("parseSample(%q) succeeded", bad)
		}
	}
}

func TestSelectCounts(t *testing.T) {
	all := map[string]float64{
		"configmaps APPLY": 20, "configmaps WATCH": 2, "hellos/status PATCH": 2, "hellos POST": 2,
		"events POST": 5, "leases PUT": 9, "compositecontrollers GET": 1, " LIST": 3,
	}
	writes := selectCounts(all, func(verb string) bool { return writeVerbs[verb] }, "configmaps", "hellos")
	want := map[string]float64{"configmaps APPLY": 20, "hellos/status PATCH": 2, "hellos POST": 2}
	if !maps.Equal(writes, want) {
		t.Errorf("writes = %v, want %v", writes, want)
	}
	reads := selectCounts(all, func(verb string) bool { return !writeVerbs[verb] }, "configmaps", "compositecontrollers")
	want = map[string]float64{"configmaps WATCH": 2, "compositecontrollers GET": 1}
	if !maps.Equal(reads, want) {
		t.Errorf("reads = %v, want %v", reads, want)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p := percentile(d, 0.5); p != 50 {
		t.Errorf("p50 = %d, want 50", p)
	}
	if p := percentile(d, 0.99); p != 99 {
		t.Errorf("p99 = %d, want 99", p)
	}
	if p := percentile(d[:1], 0.99); p != 1 {
		t.Errorf("p99 of one = %d, want 1", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of none = %d, want 0", p)
	}
}

func TestLayout(t *testing.T) {
	l := newLayout("b", 10, 3)
	if l.namespace(0) != "b-0" || l.namespace(2) != "b-0" || l.namespace(3) != "b-1" || l.count(10) != 4 {
		t.Errorf("layout of 3 per namespace: %s %s %s, %d namespaces", l.namespace(0), l.namespace(2), l.namespace(3), l.count(10))
	}
	if one := newLayout("b", 10, 0); one.count(10) != 1 || one.namespace(9) != "b-0" {
		t.Errorf("layout of all in one: %d namespaces", one.count(10))
	}
}

func TestIntList(t *testing.T) {
	var l intList
	if err := l.Set("500, 2000"); err != nil || len(l) != 2 || l[0] != 500 || l[1] != 2000 || l.String() != "500,2000" {
		t.Errorf("Set(\"500, 2000\") = %v, %v", l, err)
	}
	for _, bad := range []string{"", "500,", "0", "-1", "x"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q) succeeded", bad)
		}
	}
}

func TestHeapAllocOf(t *testing.T) {
	profile := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# TotalAlloc = 456\n# HeapAlloc = 12345678\n# Sys = 1\n"
	if n, err := heapAllocOf([]byte(profile)); err != nil || n != 12345678 {
		t.Errorf("heapAllocOf = %d, %v; want 12345678", n, err)
	}
	if _, err := heapAllocOf([]byte("heap profile: 1\n")); err == nil {
		t.Error("heapAllocOf of a profile without MemStats succeeded")
	}
}

// B10's stack runs pods, which no other benchmark may share: with
// -pods.parents, podStackOptions turns them on for B10 alone and refuses a
// pattern that selects others too.
func TestPodStackOptions(t *testing.T) {
	saved := *podParents
	t.Cleanup(func() { *podParents = saved })
	*podParents = 0
	if opts, err := podStackOptions("PodChildren", framework.Options{}); err != nil || opts.Pods != nil {
		t.Errorf("without -pods.parents: pods %v, err %v; want no pods, no error", opts.Pods, err)
	}
	*podParents = 500
	if opts, err := podStackOptions("^BenchmarkPodChildren$", framework.Options{}); err != nil || opts.Pods == nil {
		t.Errorf("B10 alone: pods %v, err %v; want pods", opts.Pods, err)
	}
	if opts, err := podStackOptions("DryRunSync", framework.Options{}); err != nil || opts.Pods != nil {
		t.Errorf("another benchmark alone: pods %v, err %v; want no pods, no error", opts.Pods, err)
	}
	if _, err := podStackOptions(".", framework.Options{}); err == nil || !strings.Contains(err.Error(), "alone") {
		t.Errorf("B10 with the others: err %v, want a refusal", err)
	}
	if !benchmarksWanted("PodChildren", "") {
		t.Errorf("benchmarksWanted(PodChildren) with -pods.parents is false")
	}
}

// TestBenchTableOfPhasesRunAlone runs hack/bench.sh --table on the output
// of B2's phases each run on a stack of its own, as hack/bench.sh runs them
// (-loop.baseline-first=false): no phase reported a ratio, and the table
// computes each from the rates.
func TestBenchTableOfPhasesRunAlone(t *testing.T) {
	result := b2ResultLine
	out := "goos: linux\n" +
		result("500/client-go-baseline", "1200 objects/s\t100 p50-ms") +
		result("500/client-go-apply-baseline", "1000 objects/s") +
		result("500/client-go-watched-apply-baseline", "800 objects/s") +
		result("500/loop", "900 objects/s\t1 converged\t20 ms-per-parent\t1000 p50-ms\t50 paced-p50-ms\t1.0 hook-calls-per-parent") +
		result("2000/client-go-baseline", "1000 objects/s\t300 p50-ms") +
		result("2000/client-go-apply-baseline", "800 objects/s") +
		result("2000/client-go-watched-apply-baseline", "700 objects/s") +
		result("2000/loop", "600 objects/s\t1 converged\t25 ms-per-parent\t3000 p50-ms\t60 paced-p50-ms\t1.0 hook-calls-per-parent") +
		"PASS\n"
	table := benchTable(t, out, "--b2-parents", "500,2000")
	for _, want := range []string{
		// The loop against client-go's creates, applies, watched applies.
		"| 0.75× | ≥ 0.8× | **no** |",
		"B2 convergence at 500 parents against client-go applying the same children (hook not tracking its children) | 900 objects/s | client-go server-side apply (force, one field manager), 32 workers: 1000 objects/s; p50 0 ms, p99 0 ms | 0.90× | ≥ 0.85× | yes |",
		"B2 convergence at 2000 parents against client-go applying the same children (hook not tracking its children) | 600 objects/s | client-go server-side apply (force, one field manager), 32 workers: 800 objects/s; p50 0 ms, p99 0 ms | 0.75× | ≥ 0.85× | **no** |",
		"against without, at 500 parents | 800 objects/s | client-go apply: 1000 objects/s | 0.80× |",
		"applying and watching the same children (hook not tracking its children) | 600 objects/s | 700 objects/s | 0.86× |",
		// Growth from the first size to the last.
		"| B2 p50(2000) / p50(500) | 3.00× | client-go: 3.00× |",
		"| B2 time per parent at 2000 / at 500 (hook not tracking its children) | 1.25× (25.0 ms per parent) | — | — | ≤ 1.2× | **no** |",
		"| B2 p50 of a new parent among 2000 / among 500 converged | 1.20× |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// hack/bench.sh --b2-rounds runs each phase of B2 once a round: the table
// reports the median of each figure, and of the loop's ratio to the
// baseline round by round, which a drift of the machine's speed between
// rounds does not move as it moves the ratio of the two medians.
func TestBenchTableMediansOfRounds(t *testing.T) {
	result := b2ResultLine
	out := "goos: linux\n"
	// Rounds of applies and loop: 1000 and 900, 800 and 800, 600 and 300
	// objects/s. Each round's ratio: 0.90, 1.00, 0.50; their median 0.90.
	// The medians of the rates, 800 and 800, would make it 1.00.
	for _, rates := range [][2]int{{1000, 900}, {800, 800}, {600, 300}} {
		out += result("500/client-go-apply-baseline", fmt.Sprintf("%d objects/s", rates[0])) +
			result("500/loop", fmt.Sprintf("%d objects/s\t1 converged", rates[1]))
	}
	out += "PASS\n"
	table := benchTable(t, out, "--b2-parents", "500")
	for _, want := range []string{
		"B2: the median of 3 runs of each phase",
		"B2 convergence at 500 parents against client-go applying the same children (hook not tracking its children) | 800 objects/s | client-go server-side apply (force, one field manager), 32 workers: 800 objects/s; p50 0 ms, p99 0 ms | 0.90× | ≥ 0.85× | yes |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// b2ResultLine is a result line of B2's phase name (size/phase) as go test
// prints it, with metrics ("value unit", tab-separated).
func b2ResultLine(name string, metrics string) string {
	return fmt.Sprintf("BenchmarkLoopConvergence/parents=%s-2 \t       1\t         0 ns/op\t%s\n", name, metrics)
}

// A run of only the tracking hooks (--b2-phases without loop) still gets
// their rows against client-go's applies, the two-call hook's among them.
func TestBenchTableWithoutTheLoop(t *testing.T) {
	out := "goos: linux\n" +
		b2ResultLine("500/client-go-apply-baseline", "1000 objects/s") +
		b2ResultLine("500/loop-tracking-ignore-status", "700 objects/s\t1 converged\t2.0 hook-calls-per-parent") +
		"PASS\n"
	table := benchTable(t, out, "--b2-parents", "500", "--b2-phases", "client-go-apply-baseline,loop-tracking-ignore-status")
	want := "B2 convergence at 500 parents against client-go applying the same children (tracking hook with `ownStatusWrites: Ignore`: two calls) | 700 objects/s |"
	if !strings.Contains(table, want) {
		t.Errorf("the table lacks %q:\n%s", want, table)
	}
}

// benchTable is the table hack/bench.sh --table prints of out, a go test
// output, with args (the sizes and phases the run had).
func benchTable(t *testing.T, out string, args ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	table, err := exec.Command("bash", append(append([]string{"../../hack/bench.sh"}, args...), "--table", file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/bench.sh --table: %v\n%s", err, table)
	}
	return string(table)
}
