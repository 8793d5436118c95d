package shard

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// GroupLabel names the group on each of its Leases, so that one list
	// reads them all.
	GroupLabel = "shards.composite.metacontroller.k8s.io/group"
	// RoleLabel tells a member's Lease ("member") from a shard's
	// ("shard").
	RoleLabel = "shards.composite.metacontroller.k8s.io/role"
	// ShardsAnnotation on a member's Lease is its number of shards: every
	// member of a group must have the same.
	ShardsAnnotation = "shards.composite.metacontroller.k8s.io/shards"

	roleMember = "member"
	roleShard  = "shard"

	// staleMembership is how many lease durations a dead replica's
	// membership Lease stays: a replica killed without leaving (a crashed
	// pod, each with a new identity) would otherwise add one to every
	// round's list forever.
	staleMembership = 4
)

// Config is a replica's part in a group of replicas sharing the loop.
type Config struct {
	// Namespace holds the Leases; Name prefixes them and names the group.
	Namespace, Name string
	// Shards is the number of shards; every replica of the group must
	// have the same.
	Shards int
	// Identity is this replica's, unique in the group (a pod name and a
	// random suffix): it names its membership Lease.
	Identity string
	// LeaseDuration is how long a Lease holds without renewal: a dead
	// replica's shards are taken over after it. RenewDeadline (less than
	// LeaseDuration) is how long a replica goes on syncing a shard it
	// could not renew: it stops before anyone else may start.
	// RetryPeriod is how often Leases are renewed and looked at.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock is the real clock when nil; tests give a fake one.
	Clock clock.WithTickerAndDelayedExecution
}

// Member runs this replica's part of the group: it keeps its membership
// Lease, acquires, renews and releases the Leases of the shards the live
// members assign it, and answers which parents it syncs now.
type Member struct {
	cfg    Config
	leases coordinationclient.LeasesGetter

	mu sync.Mutex
	// held are the shards whose Lease this replica holds.
	held map[int]*heldShard
	// memberRenewed is when this replica's membership was last renewed.
	memberRenewed time.Time
	memberLease   *coordinationv1.Lease
	// seen is, for every Lease of the group, its last record and when
	// this replica saw it change, on its own clock: as client-go's
	// leader election, it never compares its clock with a holder's.
	seen map[string]observation
	// listed are the group's Leases as the last round read them, by name.
	listed    map[string]*coordinationv1.Lease
	listeners []func(gained func(key string) bool)
	// leader holds the group's leader-election Lease as last read, "" for
	// nobody: while it does, this replica syncs no parent.
	leader string
	// idle is signalled when a shard's last sync in flight ends.
	idle *sync.Cond
}

// acquisitions numbers the holds of shards in this process (each hold's
// epoch): unique across Members, as one replica's can be made anew.
var acquisitions atomic.Uint64

type heldShard struct {
	lease *coordinationv1.Lease
	// renewed is when the last renewal that succeeded was sent: the
	// shard is synced until renewed+RenewDeadline, and nobody else may
	// take it before LeaseDuration after the write was seen.
	renewed time.Time
	// inFlight counts syncs of the shard's parents running now.
	inFlight int
	// releasing: no new sync starts; the Lease is released once the
	// syncs in flight are done.
	releasing bool
	// epoch tells this hold from the replica's earlier holds of the shard.
	epoch uint64
}

type observation struct {
	resourceVersion string
	at              time.Time
}

// NewMember returns a replica's Member; Run runs it.
func NewMember(cfg Config, leases coordinationclient.LeasesGetter) (*Member, error) {
	if cfg.Shards <= 0 {
		return nil, fmt.Errorf("shards must be positive, not %d", cfg.Shards)
	}
	if cfg.RenewDeadline <= 0 || cfg.RenewDeadline >= cfg.LeaseDuration {
		return nil, fmt.Errorf("the renew deadline (%s) must be positive and less than the lease duration (%s): a replica stops syncing a shard before anyone else may take it", cfg.RenewDeadline, cfg.LeaseDuration)
	}
	if cfg.RetryPeriod <= 0 || cfg.RetryPeriod >= cfg.RenewDeadline {
		return nil, fmt.Errorf("the retry period (%s) must be positive and less than the renew deadline (%s)", cfg.RetryPeriod, cfg.RenewDeadline)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &Member{cfg: cfg, leases: leases, held: map[int]*heldShard{}, seen: map[string]observation{}}
	m.idle = sync.NewCond(&m.mu)
	return m, nil
}

// Shards is the number of shards of the group.
func (m *Member) Shards() int { return m.cfg.Shards }

// Epoch tells this replica's holds of the shard of key apart: it is new
// each time the replica acquires the shard, and 0 while it does not own
// it. What a sync found under one hold says nothing of a parent that
// another replica may have synced since, while it held the shard (the
// rollout's gate counts a result only under the hold it was made in).
func (m *Member) Epoch(key string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Of(key, m.cfg.Shards)
	if !m.ownsLocked(s) {
		return 0
	}
	return m.held[s].epoch
}

// Owns tells whether this replica syncs the parent of key now: it holds
// the Lease of the parent's shard, renewed less than RenewDeadline ago.
func (m *Member) Owns(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownsLocked(Of(key, m.cfg.Shards))
}

func (m *Member) ownsLocked(s int) bool {
	h := m.held[s]
	return h != nil && !h.releasing && m.cfg.Clock.Since(h.renewed) < m.cfg.RenewDeadline
}

// Begin admits a sync of the parent of key when this replica owns its
// shard, and returns the context the sync runs with: it is cancelled when
// the shard's renew deadline passes without a renewal, by this replica's
// clock, so that a sync already running also stops before another replica
// may take the shard (leader election's fencing, for work in flight: a
// hook call or an apply is abandoned mid-way, and the shard's next owner
// syncs the parent again). done must be called when the sync ends. A shard
// given up to another replica is released only when its syncs in flight
// are done, renewed meanwhile.
func (m *Member) Begin(ctx context.Context, key string) (context.Context, func(), bool) {
	s := Of(key, m.cfg.Shards)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ownsLocked(s) {
		return nil, nil, false
	}
	h := m.held[s]
	h.inFlight++
	syncCtx, cancel := context.WithCancelCause(ctx)
	var timer clock.Timer
	var watch, later func()
	watch = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if syncCtx.Err() != nil {
			return
		}
		left := m.cfg.RenewDeadline - m.cfg.Clock.Since(h.renewed)
		if m.held[s] != h || left <= 0 {
			cancel(fmt.Errorf("shard %d was not renewed within the renew deadline (%s): another replica may take it", s, m.cfg.RenewDeadline))
			return
		}
		timer = m.cfg.Clock.AfterFunc(left, later)
	}
	// In a goroutine of its own: a fake clock calls it while it holds its
	// lock, which watch's reading of the clock takes again.
	later = func() { go watch() }
	timer = m.cfg.Clock.AfterFunc(m.cfg.RenewDeadline-m.cfg.Clock.Since(h.renewed), later)
	return syncCtx, func() {
		cancel(nil)
		m.mu.Lock()
		defer m.mu.Unlock()
		timer.Stop()
		if h.inFlight--; h.inFlight == 0 {
			m.idle.Broadcast()
		}
	}, true
}

// OnGained calls f after this replica acquired shards, with what tells
// whether a key is in one of them: the loop queues their parents again.
func (m *Member) OnGained(f func(gained func(key string) bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, f)
}

// Owned are the shards this replica syncs now.
func (m *Member) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for s := range m.held {
		if m.ownsLocked(s) {
			out = append(out, s)
		}
	}
	sort.Ints(out)
	return out
}

// Identity is this replica's in the group.
func (m *Member) Identity() string { return m.cfg.Identity }

// Holders are the replicas that hold each shard now, as this replica saw
// the group's Leases in its last round ("" for a shard nobody holds, or
// whose Lease expired): a rollout's driver counts each shard's report
// from its holder only.
func (m *Member) Holders() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	out := make([]string, m.cfg.Shards)
	for s := range out {
		if m.ownsLocked(s) {
			out[s] = m.cfg.Identity
			continue
		}
		if l := m.listed[m.shardLeaseName(s)]; l != nil && holder(l) != m.cfg.Identity && !m.expiredLocked(l, now) {
			out[s] = holder(l)
		}
	}
	return out
}

// Run keeps this replica's part until ctx is done, then stops syncing and
// releases its Leases, so that the others take its shards at once.
func (m *Member) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("shardGroup", m.cfg.Name, "identity", m.cfg.Identity)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Joining the group of replicas that share the controller loop", "shards", m.cfg.Shards)
	ticker := m.cfg.Clock.NewTicker(m.cfg.RetryPeriod)
	defer ticker.Stop()
	for {
		// A round's requests end before the renew deadline: a hung
		// request must not keep the next round from starting.
		stepCtx, cancel := context.WithTimeout(ctx, m.cfg.RenewDeadline)
		m.step(stepCtx)
		cancel()
		select {
		case <-ctx.Done():
			leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.RenewDeadline)
			m.leave(leaveCtx)
			cancel()
			return
		case <-ticker.C():
		}
	}
}

// step is one round: renew the membership, read the group, give up the
// shards the live members assign to others, renew the ones kept, and
// acquire the ones assigned to this replica that are free.
func (m *Member) step(ctx context.Context) {
	logger := klog.FromContext(ctx)
	m.renewMembership(ctx)
	list, err := m.leases.Leases(m.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{GroupLabel: m.cfg.Name}).String(),
	})
	if err != nil {
		// Nothing to decide on, but no reason to let the shards held
		// lapse: renew them, as if they were assigned to this replica.
		logger.Error(err, "Can't read the group's Leases: renewing the shards held, acquiring none")
		m.keepHeld(ctx)
		return
	}
	now := m.cfg.Clock.Now()
	byName := map[string]*coordinationv1.Lease{}
	var members, disagree []string
	var stale []*coordinationv1.Lease
	m.mu.Lock()
	m.listed = byName
	for i := range list.Items {
		l := &list.Items[i]
		byName[l.Name] = l
		if o, ok := m.seen[l.Name]; !ok || o.resourceVersion != l.ResourceVersion {
			m.seen[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
		}
		if l.Labels[RoleLabel] != roleMember || holder(l) == "" || holder(l) == m.cfg.Identity {
			continue
		}
		if !m.expiredLocked(l, now) {
			members = append(members, holder(l))
			if n := l.Annotations[ShardsAnnotation]; n != "" && n != strconv.Itoa(m.cfg.Shards) {
				disagree = append(disagree, holder(l)+" ("+n+")")
			}
		} else if now.Sub(m.seen[l.Name].at) >= staleMembership*m.cfg.LeaseDuration {
			stale = append(stale, l)
		}
	}
	// This replica counts itself while the others can: while its
	// membership is renewed.
	if !m.memberRenewed.IsZero() && now.Sub(m.memberRenewed) < m.cfg.RenewDeadline {
		members = append(members, m.cfg.Identity)
	}
	m.mu.Unlock()
	m.expire()
	for _, l := range stale {
		// On the version seen: a member that came back since keeps it.
		rv := l.ResourceVersion
		if err := m.leases.Leases(m.cfg.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err == nil {
			logger.V(2).Info("Deleted the membership Lease of a replica gone for long", "lease", l.Name)
		}
	}

	// After this replica's membership was written: a leader that
	// acquires its Lease after this read sees the membership and steps
	// down (see leaderHeld).
	leader, err := m.leaderHeld(ctx, now)
	if err != nil {
		logger.Error(err, "Can't tell whether a --leader-elect replica runs the loop: renewing the shards held, acquiring none")
		m.keepHeld(ctx)
		return
	}
	if m.waitForLeader(logger, leader) {
		m.decide(ctx, make([]string, m.cfg.Shards), byName, now)
		return
	}

	shardsDisagreeing.Set(float64(len(disagree)))
	if len(disagree) > 0 {
		// Another number of shards hashes parents differently: a parent of
		// a shard held here may be in one the other replica holds. Syncing
		// nothing until they agree (the other replicas stop too) keeps any
		// parent from being synced twice at once, during a rollout that
		// changes --shards and on a misconfigured one alike.
		logger.Error(nil, "Live replicas of this group run with another --shards: syncing no parent until every replica has the same", "shards", m.cfg.Shards, "replicas", disagree)
		m.decide(ctx, make([]string, m.cfg.Shards), byName, now)
		return
	}
	m.decide(ctx, Assign(m.cfg.Shards, members), byName, now)
}

// keepHeld renews the shards held and acquires none: for a round that
// could not tell who should own what.
func (m *Member) keepHeld(ctx context.Context) {
	m.expire()
	owners := make([]string, m.cfg.Shards)
	m.mu.Lock()
	for s := range m.held {
		owners[s] = m.cfg.Identity
	}
	m.mu.Unlock()
	m.decide(ctx, owners, nil, m.cfg.Clock.Now())
}

// waitForLeader tells whether this replica must sync no parent because
// leader, when not "", holds the group's leader-election Lease: a
// --leader-elect replica syncs every parent, those of this replica's
// shards too. It logs when the wait begins and ends.
func (m *Member) waitForLeader(logger klog.Logger, leader string) bool {
	m.mu.Lock()
	before := m.leader
	m.leader = leader
	m.mu.Unlock()
	switch {
	case leader != "" && before != leader:
		logger.Info("A --leader-elect replica holds the group's Lease and runs the loop for every parent: this replica syncs none until it steps down or its Lease expires",
			"lease", m.cfg.Namespace+"/"+m.cfg.Name, "leader", leader)
	case leader == "" && before != "":
		logger.Info("The --leader-elect replica gave the group's Lease up: taking shards", "lease", m.cfg.Namespace+"/"+m.cfg.Name, "leader", before)
	}
	if leader != "" {
		waitingForLeader.Set(1)
		return true
	}
	waitingForLeader.Set(0)
	return false
}

// decide gives up the shards owners assigns to others, renews the ones
// kept, acquires the ones assigned to this replica that are free (byName
// are the group's Leases as listed at now), and tells the listeners of
// the shards gained.
func (m *Member) decide(ctx context.Context, owners []string, byName map[string]*coordinationv1.Lease, now time.Time) {
	logger := klog.FromContext(ctx)
	// Renewals run side by side: one after the other, a slow API server
	// would make the last ones late enough to lapse.
	var (
		wg       sync.WaitGroup
		gainedMu sync.Mutex
		gained   []int
	)
	gain := func(s int) {
		gainedMu.Lock()
		defer gainedMu.Unlock()
		gained = append(gained, s)
	}
	renew := func(s int, h *heldShard) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m.renew(ctx, s, h) {
				gain(s)
			}
		}()
	}
	for s := 0; s < m.cfg.Shards; s++ {
		m.mu.Lock()
		h := m.held[s]
		m.mu.Unlock()
		switch {
		case h != nil && h.releasing:
			// Its release waits for syncs in flight, which may take
			// longer than the Lease lasts: keep it meanwhile.
			m.mu.Lock()
			busy := h.inFlight > 0
			m.mu.Unlock()
			if busy {
				renew(s, h)
			}
		case h != nil && owners[s] != m.cfg.Identity:
			logger.V(2).Info("Giving up a shard another member is assigned", "shard", s, "to", owners[s])
			m.release(ctx, s, h)
		case h != nil:
			renew(s, h)
		case owners[s] == m.cfg.Identity:
			if m.acquire(ctx, s, byName[m.shardLeaseName(s)], now) {
				gain(s)
			}
		}
	}
	wg.Wait()
	sort.Ints(gained)
	shardsOwned.Set(float64(len(m.Owned())))
	shardsGainedTotal.Add(float64(len(gained)))
	if len(gained) > 0 {
		logger.Info("Acquired shards", "shards", gained, "owned", len(m.Owned()))
		set := map[int]bool{}
		for _, s := range gained {
			set[s] = true
		}
		m.mu.Lock()
		listeners := append([]func(func(string) bool){}, m.listeners...)
		m.mu.Unlock()
		for _, f := range listeners {
			f(func(key string) bool { return set[Of(key, m.cfg.Shards)] })
		}
	}
}

// expire forgets the shards renewed too long ago: their parents are not
// synced any more (Owns says so already), and getting one back is a gain
// whose parents are queued again.
func (m *Member) expire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, h := range m.held {
		if !h.releasing && m.cfg.Clock.Since(h.renewed) >= m.cfg.RenewDeadline {
			delete(m.held, s)
		}
	}
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// expiredLocked tells whether l has not changed for its duration since
// this replica first saw its current record.
func (m *Member) expiredLocked(l *coordinationv1.Lease, now time.Time) bool {
	return expired(l, m.seen[l.Name], m.cfg.LeaseDuration, now)
}

func (m *Member) memberLeaseName() string { return m.cfg.Name + "-member-" + m.cfg.Identity }

func (m *Member) shardLeaseName(s int) string { return m.cfg.Name + "-shard-" + strconv.Itoa(s) }

func (m *Member) newLease(name, role string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: m.cfg.Namespace,
		Labels: map[string]string{GroupLabel: m.cfg.Name, RoleLabel: role},
	}}
	if role == roleMember {
		l.Annotations = map[string]string{ShardsAnnotation: strconv.Itoa(m.cfg.Shards)}
	}
	return l
}

// hold fills l's spec as held by this replica from now.
func (m *Member) hold(l *coordinationv1.Lease, now time.Time, acquired bool) {
	seconds := int32(m.cfg.LeaseDuration.Round(time.Second) / time.Second)
	l.Spec.HolderIdentity = &m.cfg.Identity
	l.Spec.LeaseDurationSeconds = &seconds
	renew := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &renew
	if acquired || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &renew
		if acquired {
			transitions := int32(0)
			if l.Spec.LeaseTransitions != nil {
				transitions = *l.Spec.LeaseTransitions + 1
			}
			l.Spec.LeaseTransitions = &transitions
		}
	}
}

func (m *Member) renewMembership(ctx context.Context) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	l := m.memberLease
	m.mu.Unlock()
	var err error
	if l == nil {
		l = m.newLease(m.memberLeaseName(), roleMember)
		m.hold(l, now, true)
		l, err = m.leases.Leases(m.cfg.Namespace).Create(ctx, l, metav1.CreateOptions{})
	} else {
		l = l.DeepCopy()
		m.hold(l, now, false)
		l, err = m.leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Can't renew this replica's membership Lease")
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
			// Read it again next round (an admin deleted it, or a
			// create whose answer was lost).
			m.memberLease = nil
			if existing, getErr := m.leases.Leases(m.cfg.Namespace).Get(ctx, m.memberLeaseName(), metav1.GetOptions{}); getErr == nil {
				m.memberLease = existing
			}
		}
		return
	}
	m.memberLease = l
	m.memberRenewed = now
}

// renew writes the shard's Lease again, on the version this replica
// wrote last: if anyone else wrote it since, the write fails and the shard
// is given up. It tells whether the shard is owned again after a lapse:
// renewed too late, it was not owned for a while (Owns said no, and its
// parents' events were dropped), and that is a gain like an acquisition.
func (m *Member) renew(ctx context.Context, s int, h *heldShard) (regained bool) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	l := h.lease.DeepCopy()
	m.mu.Unlock()
	m.hold(l, now, false)
	updated, err := m.leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Info("A shard's Lease was changed by someone else: not syncing it any more", "shard", s, "err", err)
			if m.held[s] == h {
				delete(m.held, s)
			}
			return false
		}
		klog.FromContext(ctx).Error(err, "Can't renew a shard's Lease", "shard", s)
		return false
	}
	if m.held[s] != h {
		return false
	}
	// Checked now, not when the request was sent: the shard may have
	// lapsed while the request was under way.
	late := m.cfg.Clock.Since(h.renewed)
	lapsed := late >= m.cfg.RenewDeadline
	if lapsed && !h.releasing {
		klog.FromContext(ctx).Info("Renewed a shard's Lease after the renew deadline: its parents are queued again", "shard", s, "sinceLastRenewal", late)
	}
	h.lease = updated
	h.renewed = now
	return lapsed && !h.releasing
}

// acquire takes the shard's Lease when it is free: released, never held,
// or not renewed for its duration as seen from here.
func (m *Member) acquire(ctx context.Context, s int, l *coordinationv1.Lease, now time.Time) bool {
	m.mu.Lock()
	free := l == nil || holder(l) == "" || holder(l) == m.cfg.Identity || m.expiredLocked(l, now)
	m.mu.Unlock()
	if !free {
		return false
	}
	var err error
	if l == nil {
		l = m.newLease(m.shardLeaseName(s), roleShard)
		m.hold(l, now, true)
		l, err = m.leases.Leases(m.cfg.Namespace).Create(ctx, l, metav1.CreateOptions{})
	} else {
		l = l.DeepCopy()
		m.hold(l, now, true)
		l, err = m.leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			klog.FromContext(ctx).Error(err, "Can't acquire a shard's Lease", "shard", s)
		}
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[s] = &heldShard{lease: l, renewed: now, epoch: acquisitions.Add(1)}
	return true
}

// release stops syncing the shard, waits for its syncs in flight, and
// then gives its Lease up, in the background: the other shards' renewals
// must not wait for a slow hook. The Lease is renewed meanwhile, as
// waiting may take longer than its duration.
func (m *Member) release(ctx context.Context, s int, h *heldShard) {
	m.mu.Lock()
	h.releasing = true
	m.mu.Unlock()
	// Not the round's context: the round ends long before the release.
	background := context.WithoutCancel(ctx)
	go func() {
		m.mu.Lock()
		for h.inFlight > 0 {
			m.idle.Wait()
		}
		l := h.lease.DeepCopy()
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(background, m.cfg.RenewDeadline)
		defer cancel()
		m.giveUp(ctx, s, l)
		m.mu.Lock()
		if m.held[s] == h {
			delete(m.held, s)
		}
		m.mu.Unlock()
	}()
}

// giveUp writes the Lease as held by nobody, on the version this replica
// wrote last, as client-go's ReleaseOnCancel does.
func (m *Member) giveUp(ctx context.Context, s int, l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = nil
	l.Spec.AcquireTime = nil
	renew := metav1.NewMicroTime(m.cfg.Clock.Now())
	l.Spec.RenewTime = &renew
	one := int32(1)
	l.Spec.LeaseDurationSeconds = &one
	_, err := m.leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// A renewal of this replica's own raced with the release: give
		// up the newer version, if it is still this replica's.
		current, getErr := m.leases.Leases(m.cfg.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		if getErr != nil || holder(current) != m.cfg.Identity {
			return
		}
		current.Spec = l.Spec
		_, err = m.leases.Leases(m.cfg.Namespace).Update(ctx, current, metav1.UpdateOptions{})
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Can't release a shard's Lease: the others take it when it expires", "shard", s)
	}
}

// leave stops syncing everything and releases this replica's Leases.
func (m *Member) leave(ctx context.Context) {
	m.mu.Lock()
	held := map[int]*heldShard{}
	for s, h := range m.held {
		h.releasing = true
		held[s] = h
	}
	for _, h := range held {
		for h.inFlight > 0 {
			m.idle.Wait()
		}
	}
	m.held = map[int]*heldShard{}
	member := m.memberLease
	m.mu.Unlock()
	for s, h := range held {
		m.giveUp(ctx, s, h.lease.DeepCopy())
	}
	if member != nil {
		_ = m.leases.Leases(m.cfg.Namespace).Delete(ctx, member.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &member.ResourceVersion}})
	}
	klog.FromContext(ctx).Info("Left the group: its shards are released")
}
