package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

var (
	fleetParents  = flag.Int("fleet.parents", 2000, "BenchmarkFleetPreview: converged parents previewed; 0 skips B9 (hack/bench.sh runs it with --b9)")
	fleetChildren = flag.Int("fleet.children", 10, "BenchmarkFleetPreview: ConfigMaps per parent")
	fleetLimit    = flag.Int64("fleet.limit", 500, "BenchmarkFleetPreview: parents per page (spec.limit)")
	fleetTimeout  = flag.Duration("fleet.timeout", 4*time.Minute, "BenchmarkFleetPreview: how long to wait for the loop to converge the parents")
)

// BenchmarkFleetPreview (B9) measures POST compositecontrollers/<cc>/preview
// of the stored controller against fleet.parents converged parents
// (fleet.children ConfigMaps each, one namespace), with the benchmarks'
// in-process hook: parents previewed per second over all the pages,
// following the continue tokens, straight to composite-apiserver as
// kube-apiserver's aggregator sends it. The baseline is B1's direct rate
// (one dry-run /sync of an inline parent a request, 8 clients), measured in
// the same run right before. While the pages stream, composite-apiserver's
// resident memory is sampled every 50 ms: its peak over the reading before
// says what a page holds.
func BenchmarkFleetPreview(b *testing.B) {
	if *fleetParents <= 0 {
		b.Skip("-fleet.parents=0")
	}
	setUp(b)
	ctx := context.Background()
	s, err := setUpSync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	name := uniqueName("bench-fleet")
	parents, children := *fleetParents, *fleetChildren
	l, hook, w := startMeasuredController(ctx, b, name, parents, 0)
	w.converge(ctx, b, name, l, parents, children, *loopCreators, *fleetTimeout, "fleet.timeout")
	w.close()
	if err := quiesce(ctx, hook, 3*time.Second, *fleetTimeout); err != nil {
		b.Fatal(err)
	}

	// B1's direct rate, now, on the same machine.
	direct := s.measure(b, *syncServerRequests, s.direct)
	url := suite.CompositeURL() + "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/" + name + "/preview"
	// One page first, not measured: connections, the compiled controller
	// and the delegating authorizer's answers are then warm.
	if _, _, err := s.previewPage(ctx, url, "", 1); err != nil {
		b.Fatal(err)
	}
	pid := suite.CompositeProcess().Pid()
	rssBefore, err := residentBytes(pid)
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := residentBytes(pid); err == nil && rss > peak {
				peak = rss
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	hook.reset()
	cpuBefore := compositeCPU(b)
	b.ResetTimer()
	var previewed, pages int
	var elapsed time.Duration
	for it := 0; it < b.N; it++ {
		start := time.Now()
		cont := ""
		for {
			page, n, err := s.previewPage(ctx, url, cont, *fleetLimit)
			if err != nil {
				b.Fatal(err)
			}
			if n.Status.Totals.Failed > 0 || n.Status.Totals.Changed > 0 {
				b.Fatalf("page %d: %+v: the stored controller over converged parents changes nothing", pages+1, n.Status.Totals)
			}
			previewed += page
			pages++
			if cont = n.Status.Continue; cont == "" {
				break
			}
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	close(stop)
	sampled.Wait()
	cpu := compositeCPU(b) - cpuBefore
	if previewed != parents*b.N {
		b.Fatalf("previewed %d parents, want %d", previewed, parents*b.N)
	}
	if calls := int(hook.calls.Load()); calls != previewed {
		b.Errorf("%d hook calls for %d parents previewed", calls, previewed)
	}
	rate := float64(previewed) / elapsed.Seconds()
	ratio := rate / direct.rps()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate, "parents/s")
	b.ReportMetric(direct.rps(), "direct-req/s")
	b.ReportMetric(ratio, "ratio-vs-direct")
	b.ReportMetric(cpu*1000/float64(previewed), "server-cpu-ms/parent")
	b.ReportMetric(float64(rssBefore)/(1<<20), "rss-before-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MiB")
	// With -sync.cpuprofile, where the server spends a page's time.
	s.profile(b, "fleet-preview", func(ctx context.Context, _ int) error {
		_, _, err := s.previewPage(ctx, url, "", *fleetLimit)
		return err
	})
	b.Logf("fleet preview: %d parents × %d ConfigMaps in %d pages of %d: %.0f parents/s (%.2f× B1 direct's %.0f req/s in the same run); composite-apiserver CPU %.2f ms a parent; RSS %.0f MiB before, %.0f MiB at its peak while streaming",
		parents, children, pages, *fleetLimit, rate, ratio, direct.rps(), cpu*1000/float64(previewed), float64(rssBefore)/(1<<20), float64(peak)/(1<<20))
}

// previewPage posts one FleetPreview of the stored controller at url and
// returns how many parents it previewed, and the answer.
func (s *syncBench) previewPage(ctx context.Context, url, cont string, limit int64) (int, *v1alpha1.FleetPreview, error) {
	req := &v1alpha1.FleetPreview{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "FleetPreview"},
		Spec:     v1alpha1.FleetPreviewSpec{Limit: limit, Continue: cont},
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, nil, err
	}
	code, data, err := s.do(ctx, s.directClient, http.MethodPost, url, body, true)
	if err != nil {
		return 0, nil, err
	}
	if code != http.StatusOK && code != http.StatusCreated {
		return 0, nil, fmt.Errorf("preview: %d %s", code, data)
	}
	out := &v1alpha1.FleetPreview{}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, nil, err
	}
	return len(out.Status.Parents), out, nil
}

// residentBytes is the resident set size of process pid.
func residentBytes(pid int) (uint64, error) { return procStatusBytes(pid, "VmRSS") }

// procStatusBytes is field (VmRSS, VmHWM, ...) of /proc/<pid>/status, in
// bytes.
func procStatusBytes(pid int, field string) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
