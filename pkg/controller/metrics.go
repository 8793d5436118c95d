package controller

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	// Registers client-go's workqueue metrics (depth, adds, latency, work
	// duration, retries) per queue, named after the controller.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/composite-apiserver/composite-apiserver/pkg/controller/sharedinformers"
)

var (
	syncsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "composite_controller_syncs_total",
		Help:           "Parent syncs by CompositeController and result (success, error, throttled).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "result"})
	syncLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "composite_controller_sync_duration_seconds",
		Help:           "Time to sync one parent: hooks, apply and status, by CompositeController.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})

	registerOnce sync.Once
)

// RegisterMetrics registers the loop's metrics with the server's /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(append([]metrics.Registerable{syncsTotal, syncLatency}, sharedinformers.Metrics()...)...)
	})
}
