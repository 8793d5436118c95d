package sharedinformers

import "k8s.io/component-base/metrics"

var informersRunning = metrics.NewGauge(&metrics.GaugeOpts{
	Name:           "composite_controller_informers",
	Help:           "Shared informers the loop runs, one watch each: one per resource some running controller uses as parent, child or related resource.",
	StabilityLevel: metrics.ALPHA,
})

// Metrics are the pool's metrics, for the server's /metrics.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{informersRunning}
}
