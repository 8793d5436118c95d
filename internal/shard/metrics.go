package shard

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	shardsOwned = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "composite_controller_shards_owned",
		Help:           "Shards whose parents this replica syncs now (--shards): about shards/replicas on each replica, 0 while it is cut off from the API server.",
		StabilityLevel: metrics.ALPHA,
	})
	shardsGainedTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "composite_controller_shards_gained_total",
		Help:           "Shards this replica acquired, or kept after a renewal came late; each queues its parents again. Steadily rising: replicas coming and going, or renewals too slow for --leader-elect-renew-deadline.",
		StabilityLevel: metrics.ALPHA,
	})

	shardsDisagreeing = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "composite_controller_shards_disagreeing_replicas",
		Help:           "Live replicas of this replica's group whose --shards differs from its own. While it is not 0 no replica of the group syncs any parent: set the same --shards on all of them.",
		StabilityLevel: metrics.ALPHA,
	})

	waitingForLeader = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "composite_controller_shards_waiting_for_leader",
		Help:           "1 while a --leader-elect replica holds the Lease named as this replica's shard group (--leader-elect-lease-name): it runs the loop for every parent, so this replica takes no shard until it steps down or its Lease expires.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// RegisterMetrics registers the shard metrics with the server's /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(shardsOwned, shardsGainedTotal, shardsDisagreeing, waitingForLeader)
	})
}
