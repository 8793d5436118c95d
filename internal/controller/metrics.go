package controller

import (
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"

	// Registers client-go's workqueue metrics (depth, adds, latency, work
	// duration, retries) per queue, named after the controller.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/eventbudget"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
)

var registerOnce sync.Once

// RegisterMetrics registers the loop's metrics with the server's /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		ms := append(parentloop.Metrics(), sharedinformers.Metrics()...)
		legacyregistry.MustRegister(append(ms, eventbudget.Metrics()...)...)
	})
}
