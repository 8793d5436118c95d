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

// RegisterMetrics registers the hook metrics in the legacy registry, which the
// server's /metrics serves. It is safe to call any number of times; New calls
// it.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(hookRequests, hookDuration, hookErrors)
	})
}
