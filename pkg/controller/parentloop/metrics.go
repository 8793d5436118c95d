package parentloop

import "k8s.io/component-base/metrics"

var (
	syncsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "composite_controller_syncs_total",
		Help:           "Parent syncs by controller (CompositeController or DecoratorController) and result (success, error, throttled).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "result"})
	syncLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "composite_controller_sync_duration_seconds",
		Help:           "Time to sync one parent: hooks, apply and status, by controller (CompositeController or DecoratorController).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})
)

// Metrics are the parent loops' metrics, for the server's /metrics.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{syncsTotal, syncLatency}
}
