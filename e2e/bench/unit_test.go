package bench

import (
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
		if got := benchmarksWanted(pattern); got != want {
			t.Errorf("benchmarksWanted(%q) = %v, want %v", pattern, got, want)
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
	if !benchmarksWanted("PodChildren") {
		t.Errorf("benchmarksWanted(PodChildren) with -pods.parents is false")
	}
}
