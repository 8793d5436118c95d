package shard

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
)

// The two ways of running the loop on several replicas share their Leases'
// namespace and name: --leader-elect holds the Lease <name>, and the
// members of --shards call their group <name>. A rollout that switches
// from one to the other runs both for a while (a RollingUpdate keeps the
// old pods until the new ones are ready), and each would sync the parents
// of the other. So a member takes no shard while the group's leader Lease
// is held (leaderHeld), and a leader runs the loop only while no member is
// live (Members). Each side writes its own Lease before it reads the
// other's: of two replicas that start at once, at least one sees the
// other.

// leaderHeld reads the group's leader-election Lease and tells who holds
// it, when it is held and has not expired as seen from here: its record
// changed less than its duration ago on this replica's clock, as client-go
// measures a leader's Lease.
func (m *Member) leaderHeld(ctx context.Context, now time.Time) (string, error) {
	l, err := m.leases.Leases(m.cfg.Namespace).Get(ctx, m.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("can't read the leader election Lease %s/%s: %w", m.cfg.Namespace, m.cfg.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.seen[l.Name]; !ok || o.resourceVersion != l.ResourceVersion {
		m.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
	}
	if holder(l) == "" || expired(l, m.seen[l.Name], m.cfg.LeaseDuration, now) {
		return "", nil
	}
	return holder(l), nil
}

// expired tells whether l has not changed for its duration (or
// defaultDuration, when it has none) since seen, when this replica first
// saw its current record.
func expired(l *coordinationv1.Lease, seen observation, defaultDuration time.Duration, now time.Time) bool {
	duration := defaultDuration
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return !seen.at.Add(duration).After(now)
}

// Members watches a group's membership Leases from outside the group: a
// --leader-elect replica with the group's Lease name runs the loop only
// while none is live, so that it steps down for the members of a rollout
// to --shards.
type Members struct {
	namespace, name string
	leaseDuration   time.Duration
	clock           clock.PassiveClock
	leases          coordinationclient.LeasesGetter

	mu sync.Mutex
	// seen is when each membership Lease's record was first seen: a
	// member is live until its record has not changed for its duration,
	// on this replica's clock.
	seen map[string]observation
}

// NewMembers watches the members of the group name in namespace, whose
// Leases last leaseDuration unless they say otherwise; clk is the real
// clock when nil.
func NewMembers(namespace, name string, leaseDuration time.Duration, leases coordinationclient.LeasesGetter, clk clock.PassiveClock) *Members {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Members{namespace: namespace, name: name, leaseDuration: leaseDuration, clock: clk, leases: leases, seen: map[string]observation{}}
}

// Live lists the identities of the group's live members. A member is live
// from the first sight of its Lease, until it leaves or its Lease has not
// changed for its duration.
func (w *Members) Live(ctx context.Context) ([]string, error) {
	list, err := w.leases.Leases(w.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{GroupLabel: w.name, RoleLabel: roleMember}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("can't list the members of the shard group %s/%s: %w", w.namespace, w.name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	seen := make(map[string]observation, len(list.Items))
	var live []string
	for i := range list.Items {
		l := &list.Items[i]
		o, ok := w.seen[l.Name]
		if !ok || o.resourceVersion != l.ResourceVersion {
			o = observation{resourceVersion: l.ResourceVersion, at: now}
		}
		seen[l.Name] = o
		if holder(l) != "" && !expired(l, o, w.leaseDuration, now) {
			live = append(live, holder(l))
		}
	}
	// Only the Leases listed now: a member that left is forgotten.
	w.seen = seen
	sort.Strings(live)
	return live, nil
}
