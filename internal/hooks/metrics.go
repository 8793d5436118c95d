package hooks

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	hookRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "composite",
		Subsystem:      "hook",
		Name:           "requests_total",
		Help:           "Number of hook calls by controller, hook and HTTP status code (\"error\" when no answer was received).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "hook", "code"})

	hookDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "composite",
		Subsystem: "hook",
		Name:      "request_duration_seconds",
		Help:      "Duration of hook calls in seconds, including reading the answer.",
		// 5ms to ~41s: the default timeout is 10s and longer ones are
		// rare (validation warns above 30s); slower calls land in +Inf.
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "hook"})

	hookErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "composite",
		Subsystem:      "hook",
		Name:           "errors_total",
		Help:           "Number of failed hook calls by controller, hook and reason (timeout, transport, status, decode, too_large, too_many_requests).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "hook", "reason"})

	registerMetrics sync.Once
)

// Metacontroller's names for the same calls, so that its users' dashboards
// and alerts keep working: metacontroller_<hook>_requests_total,
// ..._request_duration_histogram_seconds and ..._in_flight_requests, for
// its three hooks (patch hooks are ours alone), labelled as its HTTP
// client instrumentation labels them.
type metacontrollerHookMetrics struct {
	requests *metrics.CounterVec
	duration *metrics.HistogramVec
	inFlight *metrics.GaugeVec
}

var metacontrollerMetrics = func() map[string]*metacontrollerHookMetrics {
	out := map[string]*metacontrollerHookMetrics{}
	for _, hook := range []string{"sync", "customize", "finalize"} {
		out[hook] = &metacontrollerHookMetrics{
			requests: metrics.NewCounterVec(&metrics.CounterOpts{
				Namespace: "metacontroller", Subsystem: hook, Name: "requests_total",
				Help:           "Hook calls answered, by HTTP status code (Metacontroller's name; see composite_hook_requests_total).",
				StabilityLevel: metrics.ALPHA,
			}, []string{"code", "method", "url", "controller_name", "controller_type"}),
			duration: metrics.NewHistogramVec(&metrics.HistogramOpts{
				Namespace: "metacontroller", Subsystem: hook, Name: "request_duration_histogram_seconds",
				Help:           "Duration of answered hook calls in seconds (Metacontroller's name; see composite_hook_request_duration_seconds).",
				StabilityLevel: metrics.ALPHA,
			}, []string{"method", "url", "controller_name", "controller_type"}),
			inFlight: metrics.NewGaugeVec(&metrics.GaugeOpts{
				Namespace: "metacontroller", Subsystem: hook, Name: "in_flight_requests",
				Help:           "Hook calls under way (Metacontroller's name).",
				StabilityLevel: metrics.ALPHA,
			}, []string{"url", "controller_name", "controller_type"}),
		}
	}
	return out
}()

// RegisterMetrics registers the hook metrics in the legacy registry, which the
// server's /metrics serves. It is safe to call any number of times; New calls
// it.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(hookRequests, hookDuration, hookErrors)
		for _, m := range metacontrollerMetrics {
			legacyregistry.MustRegister(m.requests, m.duration, m.inFlight)
		}
	})
}
