// Package eventbudget bounds the routine Events one controller records: the
// Normal Events that say what its syncs did to children ("Create ConfigMap
// a, b, … and 5 more"), one per parent a sync wrote children of.
//
// An Event costs kube-apiserver and etcd nearly what creating a ConfigMap
// costs them (B12: 0.85× a create, 0.58× a child's apply). When thousands
// of parents are created at once, one Event per parent adds a few per cent
// to what the loop costs them, a cost no controller without Events pays,
// and client-go's broadcaster, whose queue of 1,000 then overflows, drops
// Events without choosing, Warnings among them. A token bucket per
// controller (a burst, then a rate) keeps the routine Events to what an
// operator reads, and the broadcaster's queue short for the Warnings and
// the rollout's Events, which are never budgeted. Kubernetes' own
// controllers are bounded the same way, by their client's rate limit
// (kube-controller-manager's --kube-api-qps). What is not recorded is
// counted (composite_controller_child_events_dropped_total) and said on
// the controller, at most once a minute.
package eventbudget

import (
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/component-base/metrics"
)

var droppedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "composite_controller_child_events_dropped_total",
	Help:           "Normal Events about what syncs did to children that were not recorded because the controller was over its budget (--child-events-qps, --child-events-burst), by controller.",
	StabilityLevel: metrics.ALPHA,
}, []string{"controller"})

// Metrics are the budgets' metrics, for the server's /metrics.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{droppedTotal}
}

// NoticeInterval is how often, at most, a budget tells that it drops Events.
const NoticeInterval = time.Minute

// Budget is one controller's budget of routine Events. A nil *Budget allows
// every Event.
type Budget struct {
	limiter flowcontrol.RateLimiter
	dropped metrics.CounterMetric
	notice  func()
	now     func() time.Time

	mu sync.Mutex
	// noticed is when notice was last called.
	noticed time.Time
}

// New is the budget of the controller named controller (its label in the
// metric): burst Events at once, then qps a second. When it first drops an
// Event, and then at most once every NoticeInterval while it drops, it calls
// notice (which records that on the controller). qps ≤ 0 means no budget:
// nil.
func New(qps float32, burst int, controller string, notice func()) *Budget {
	if qps <= 0 {
		return nil
	}
	return &Budget{
		limiter: flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1)),
		dropped: droppedTotal.WithLabelValues(controller),
		notice:  notice,
		now:     time.Now,
	}
}

// Allow tells whether one more routine Event may be recorded now, and
// counts it dropped when not.
func (b *Budget) Allow() bool {
	if b == nil || b.limiter.TryAccept() {
		return true
	}
	b.dropped.Inc()
	b.mu.Lock()
	now := b.now()
	due := b.noticed.IsZero() || now.Sub(b.noticed) >= NoticeInterval
	if due {
		b.noticed = now
	}
	b.mu.Unlock()
	if due && b.notice != nil {
		b.notice()
	}
	return false
}
