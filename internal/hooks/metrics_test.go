package hooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func counterValue(t *testing.T, get func() (float64, error)) float64 {
	t.Helper()
	v, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMetricsCountCallsAndErrors(t *testing.T) {
	ok := httptest.NewServer(okHandler(okBody))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer failing.Close()

	const controller = "metrics-test"
	good := mustNew(t, Config{Controller: controller, Webhook: urlHook(ok.URL)})
	bad := mustNew(t, Config{Controller: controller, Webhook: urlHook(failing.URL)})

	for i := 0; i < 2; i++ {
		if _, err := good.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bad.Sync(context.Background(), syncRequest()); err == nil {
		t.Fatal("want an error")
	}

	for _, tc := range []struct {
		name string
		get  func() (float64, error)
		want float64
	}{
		{"requests with code 200", func() (float64, error) {
			return testutil.GetCounterMetricValue(hookRequests.WithLabelValues(controller, "sync", "200"))
		}, 2},
		{"requests with code 503", func() (float64, error) {
			return testutil.GetCounterMetricValue(hookRequests.WithLabelValues(controller, "sync", "503"))
		}, 1},
		{"errors with reason status", func() (float64, error) {
			return testutil.GetCounterMetricValue(hookErrors.WithLabelValues(controller, "sync", ReasonStatus))
		}, 1},
		// Metacontroller's names and labels for the same calls.
		{"metacontroller_sync_requests_total with code 200", func() (float64, error) {
			return testutil.GetCounterMetricValue(metacontrollerMetrics["sync"].requests.WithLabelValues("200", "post", ok.URL, controller, "CompositeController"))
		}, 2},
		{"metacontroller_sync_requests_total with code 503", func() (float64, error) {
			return testutil.GetCounterMetricValue(metacontrollerMetrics["sync"].requests.WithLabelValues("503", "post", failing.URL, controller, "CompositeController"))
		}, 1},
		{"metacontroller_sync_in_flight_requests once the calls are done", func() (float64, error) {
			return testutil.GetGaugeMetricValue(metacontrollerMetrics["sync"].inFlight.WithLabelValues(ok.URL, controller, "CompositeController"))
		}, 0},
	} {
		if got := counterValue(t, tc.get); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n, err := testutil.GetHistogramMetricCount(hookDuration.WithLabelValues(controller, "sync")); err != nil || n != 3 {
		t.Errorf("duration observations = %d (%v), want 3", n, err)
	}

	// The metrics are in the registry the server's /metrics serves.
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"composite_hook_requests_total", "composite_hook_request_duration_seconds", "composite_hook_errors_total",
		"metacontroller_sync_requests_total", "metacontroller_sync_request_duration_histogram_seconds", "metacontroller_sync_in_flight_requests"} {
		if !found[name] {
			t.Errorf("%s is not in the legacy registry", name)
		}
	}
	RegisterMetrics() // registering again is harmless
}
