package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hangingHook is a sync hook that never answers: each call waits until
// the server gives up on it (the webhook's timeout).
type hangingHook struct {
	calls, inFlight atomic.Int64
}

// registerHanging serves a hanging hook for controller and returns the URL
// its webhook takes (the manifest appends /sync).
func (h *hookServer) registerHanging(controller string) (string, *hangingHook) {
	hh := &hangingHook{}
	h.mux.Handle("/"+controller+"/sync", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hh.calls.Add(1)
		hh.inFlight.Add(1)
		defer hh.inFlight.Add(-1)
		<-r.Context().Done()
	}))
	return h.srv.URL + "/" + controller, hh
}

// BenchmarkIsolation (B6) measures how much a controller whose hook hangs
// slows down another controller: isolation.parents parents (loop.children
// ConfigMaps each) of a healthy controller converge once with nothing else
// running, and once while a second controller's hook hangs until its
// timeout (isolation.hook-timeout) for every one of its isolation.hanging
// parents, all of its workers stuck in calls. It reports both convergence
// times (parents created → every status and child) and their ratio; it
// measures, it does not judge: hack/bench.sh prints the ratio.
func BenchmarkIsolation(b *testing.B) {
	setUp(b)
	var without time.Duration
	b.Run("without", func(b *testing.B) {
		without = runIsolated(b, nil)
	})
	b.Run("hanging", func(b *testing.B) {
		ctx := context.Background()
		name := uniqueName("bench-hang")
		url, hh := env.hook.registerHanging(name)
		controller := benchController(name, url)
		controller.Timeout = isolationHookTimeout.String()
		manifest := controller.Manifest()
		if err := suite.Apply(ctx, manifest); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { deleteController(name) })
		l := newLayout(name, *isolationHanging, 0)
		if err := l.create(ctx, *isolationHanging); err != nil {
			b.Fatal(err)
		}
		if _, err := forEach(ctx, *isolationHanging, 16, func(ctx context.Context, i int) error {
			p := newParent(l.namespace(i), fmt.Sprintf("p%d", i), name, *loopChildren)
			_, err := env.dyn.Resource(hellosGVR).Namespace(p.GetNamespace()).Create(ctx, p, metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		// Every worker of the hanging controller stuck in a call.
		workers := int64(min(*isolationHanging, 32))
		if *compositeWorkers > 0 {
			workers = int64(min(*isolationHanging, *compositeWorkers))
		}
		deadline := time.Now().Add(time.Minute)
		for hh.inFlight.Load() < workers {
			if time.Now().After(deadline) {
				b.Fatalf("the hanging hook has %d calls in flight, want %d (one per worker)", hh.inFlight.Load(), workers)
			}
			time.Sleep(50 * time.Millisecond)
		}
		with := runIsolated(b, hh)
		b.ReportMetric(float64(hh.calls.Load()), "hanging-calls")
		if without > 0 {
			ratio := float64(with) / float64(without)
			b.ReportMetric(ratio, "ratio-vs-without")
			b.ReportMetric(without.Seconds(), "without-s")
			b.Logf("isolation: %d parents converged in %.2f s while another controller's hook hung for %d parents, %.2f s without: %.2f×",
				*isolationParents, with.Seconds(), *isolationHanging, without.Seconds(), ratio)
		}
	})
}

// runIsolated converges isolation.parents parents of a new healthy
// controller and returns how long it took; with a hanging hook, it checks
// that the hook stayed stuck all along.
func runIsolated(b *testing.B, hanging *hangingHook) time.Duration {
	ctx := context.Background()
	name := uniqueName("bench-isolated")
	parents, children := *isolationParents, *loopChildren
	l, hook, w := startMeasuredController(ctx, b, name, parents, 0)
	// How many hanging calls were in flight, sampled while the parents
	// converge.
	var samples, inFlight atomic.Int64
	stop := make(chan struct{})
	if hanging != nil {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				samples.Add(1)
				inFlight.Add(hanging.inFlight.Load())
			}
		}()
	}
	start := time.Now()
	w.converge(ctx, b, name, l, parents, children, *loopCreators, *loopTimeout, "")
	_, _, last := w.progress()
	elapsed := last.Sub(start)
	close(stop)
	lat := w.latencies()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(elapsed.Seconds(), "converged-s")
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(float64(hook.calls.Load()), "hook-calls")
	if hanging != nil && samples.Load() > 0 {
		mean := float64(inFlight.Load()) / float64(samples.Load())
		b.ReportMetric(mean, "hanging-in-flight")
		b.Logf("isolation: the hanging hook had %.1f calls in flight on average while the parents converged", mean)
	}
	b.Logf("isolation: %d parents × %d ConfigMaps converged in %.2f s (p50 %.0f ms, p99 %.0f ms), %d hook calls",
		parents, children, elapsed.Seconds(), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), hook.calls.Load())
	return elapsed
}
