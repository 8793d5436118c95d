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
	panicsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "composite_controller_panics_total",
		Help:           "Panics recovered in a controller's sync or rollout, by controller (CompositeController or DecoratorController): each one was retried with backoff, and the server served on.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})
)

// CountPanic counts a panic recovered in the controller of key (the
// manager's name for it: Run's key).
func CountPanic(key string) { panicsTotal.WithLabelValues(key).Inc() }

// Metrics are the parent loops' metrics, for the server's /metrics.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{syncsTotal, syncLatency, panicsTotal}
}
