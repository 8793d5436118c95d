package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testShards    = 8
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	namespace     = "composite-system"
)

// cluster is one fake kube-apiserver's Leases, with what the real one does
// and the fake does not: resource versions and compare-and-swap updates.
type cluster struct {
	client *fake.Clientset
	clock  *clocktesting.FakeClock
}

func newCluster() *cluster {
	c := &cluster{client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var mu sync.Mutex
	version := 0
	c.client.PrependReactor("create", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		version++
		l.ResourceVersion = strconv.Itoa(version)
		if err := c.client.Tracker().Create(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	c.client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		current, err := c.client.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if current.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
		}
		version++
		l.ResourceVersion = strconv.Itoa(version)
		if err := c.client.Tracker().Update(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	return c
}

// replica is a Member whose connection to the cluster can be cut.
type replica struct {
	*Member
	cut atomic.Bool
}

func (c *cluster) join(t *testing.T, identity string) *replica {
	t.Helper()
	return c.joinWith(t, identity, testShards)
}

// joinWith is join with shards shards.
func (c *cluster) joinWith(t *testing.T, identity string, shards int) *replica {
	t.Helper()
	r := &replica{}
	m, err := NewMember(Config{
		Namespace: namespace, Name: "loop", Shards: shards, Identity: identity,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod, Clock: c.clock,
	}, cuttable{LeasesGetter: c.client.CoordinationV1(), cut: &r.cut})
	if err != nil {
		t.Fatal(err)
	}
	r.Member = m
	return r
}

type cuttable struct {
	coordinationclient.LeasesGetter
	cut *atomic.Bool
}

func (c cuttable) Leases(ns string) coordinationclient.LeaseInterface {
	return cutLeases{LeaseInterface: c.LeasesGetter.Leases(ns), cut: c.cut}
}

type cutLeases struct {
	coordinationclient.LeaseInterface
	cut *atomic.Bool
}

var errCut = errors.New("connection refused")

// refuse fails a request on a cut connection, or whose context is done,
// as a real client does (the fake one ignores contexts).
func (c cutLeases) refuse(ctx context.Context) error {
	if c.cut.Load() {
		return errCut
	}
	return ctx.Err()
}

func (c cutLeases) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := c.refuse(ctx); err != nil {
		return nil, err
	}
	return c.LeaseInterface.Create(ctx, l, o)
}

func (c cutLeases) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := c.refuse(ctx); err != nil {
		return nil, err
	}
	return c.LeaseInterface.Update(ctx, l, o)
}

func (c cutLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := c.refuse(ctx); err != nil {
		return nil, err
	}
	return c.LeaseInterface.Get(ctx, name, o)
}

func (c cutLeases) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if err := c.refuse(ctx); err != nil {
		return nil, err
	}
	return c.LeaseInterface.List(ctx, o)
}

// round steps every replica once, each at the same instant, then moves
// the clock a retry period on; after each step no shard may be owned by
// two replicas.
func (c *cluster) round(t *testing.T, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		// As Run: each round's context ends with it.
		ctx, cancel := context.WithCancel(context.Background())
		r.step(ctx)
		cancel()
		noShardOwnedTwice(t, c.clock.Now(), rs...)
	}
	c.clock.Step(retryPeriod)
	noShardOwnedTwice(t, c.clock.Now(), rs...)
}

func noShardOwnedTwice(t *testing.T, now time.Time, rs ...*replica) {
	t.Helper()
	owner := map[int]string{}
	for _, r := range rs {
		for _, s := range r.Owned() {
			if other, ok := owner[s]; ok {
				t.Fatalf("at %s shard %d is owned by %s and %s", now.Format(time.TimeOnly), s, other, r.cfg.Identity)
			}
			owner[s] = r.cfg.Identity
		}
	}
}

// settle runs rounds until every shard is owned by the replica the live
// members assign it to.
func (c *cluster) settle(t *testing.T, rs ...*replica) {
	t.Helper()
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.cfg.Identity)
	}
	want := Assign(testShards, ids)
	for i := 0; i < 20; i++ {
		c.round(t, rs...)
		if c.ownersAre(want, rs...) {
			return
		}
	}
	t.Fatalf("the shards did not settle on %v", want)
}

func (c *cluster) ownersAre(want []string, rs ...*replica) bool {
	got := make([]string, testShards)
	for _, r := range rs {
		for _, s := range r.Owned() {
			got[s] = r.cfg.Identity
		}
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

func TestReplicasShareTheShardsAndNeverOwnOneTogether(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	if got := len(a.Owned()); got != testShards {
		t.Fatalf("a alone owns %d shards, want all %d", got, testShards)
	}
	b, d := c.join(t, "b"), c.join(t, "d")
	c.settle(t, a, b, d)
	for _, r := range []*replica{a, b, d} {
		if n := len(r.Owned()); n < testShards/3 || n > testShards/3+1 {
			t.Errorf("%s owns %d of %d shards", r.cfg.Identity, n, testShards)
		}
	}
}

// TestReplicasWithAnotherNumberOfShardsSyncNothingUntilTheyAgree: a
// replica started with another --shards hashes parents into other shards,
// so a parent could be synced by it and by the owner of its shard here at
// once. Both sides give up every shard while both are live, and the group
// settles again once the odd one is gone.
func TestReplicasWithAnotherNumberOfShardsSyncNothingUntilTheyAgree(t *testing.T) {
	c := newCluster()
	a, b := c.join(t, "a"), c.join(t, "b")
	c.settle(t, a, b)
	odd := c.joinWith(t, "odd", testShards*2)
	for i := 0; i < 3; i++ {
		c.round(t, a, b, odd)
	}
	for _, r := range []*replica{a, b, odd} {
		if n := len(r.Owned()); n != 0 {
			t.Errorf("%s owns %d shards while a live replica disagrees on their number", r.cfg.Identity, n)
		}
	}
	odd.leave(context.Background())
	c.settle(t, a, b)
}

// TestAReplicaThatCannotRenewStopsBeforeItsShardsCanBeTaken is the fencing
// of client-go's leader election, per shard: a replica cut off from the
// cluster stops syncing its shards once RenewDeadline has passed since it
// last renewed them, and the others take them only once LeaseDuration has
// passed since they saw that renewal: never both at once, and within the
// lease duration and one round. That holds even when the cut replica's
// rounds hang and never run again: its syncs stop by the clock.
func TestAReplicaThatCannotRenewStopsBeforeItsShardsCanBeTaken(t *testing.T) {
	c := newCluster()
	a, b := c.join(t, "a"), c.join(t, "b")
	c.settle(t, a, b)
	lost := a.Owned()
	key := keyIn(lost[0])
	// A sync of key is running when the connection is cut: it must be
	// stopped by the same clock, before b may take the shard.
	syncCtx, done, ok := a.Begin(context.Background(), key)
	if !ok {
		t.Fatalf("a does not own %s", key)
	}
	defer done()
	a.cut.Store(true)
	cutAt := c.clock.Now()
	lastRenewal := cutAt.Add(-retryPeriod)
	var stopped, takenOver time.Time
	for c.clock.Since(cutAt) < 2*leaseDuration {
		// a's rounds hang on its cut connection (a request that never
		// answers): nothing but the clock stops it. Smaller steps than
		// a round, to see the order of events.
		b.step(context.Background())
		for i := 0; i < 4; i++ {
			now := c.clock.Now()
			if stopped.IsZero() && !a.Owns(key) {
				stopped = now
			}
			if takenOver.IsZero() && b.Owns(key) {
				takenOver = now
				// The fake clock runs a's timers in goroutines of their
				// own: give them a moment, then the sync must be over.
				if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
					return syncCtx.Err() != nil, nil
				}); err != nil {
					t.Fatalf("at %s b took over %s while a's sync of it still ran", now.Format(time.TimeOnly), key)
				}
				if cause := context.Cause(syncCtx); !strings.Contains(cause.Error(), "renew deadline") {
					t.Errorf("the sync was stopped by %v, want the renew deadline named", cause)
				}
			}
			if a.Owns(key) && b.Owns(key) {
				t.Fatalf("at %s both replicas sync %s", now.Format(time.TimeOnly), key)
			}
			c.clock.Step(retryPeriod / 4)
		}
	}
	if stopped.IsZero() || takenOver.IsZero() {
		t.Fatalf("a stopped at %v, b took over at %v: want both", stopped, takenOver)
	}
	if d := stopped.Sub(lastRenewal); d > renewDeadline {
		t.Errorf("a stopped syncing %s after its last renewal, later than the renew deadline %s", d, renewDeadline)
	}
	if d := takenOver.Sub(lastRenewal); d < leaseDuration || d > leaseDuration+2*retryPeriod {
		t.Errorf("b took the shard over %s after a's last renewal, want between the lease duration %s and one more round", d, leaseDuration)
	}
	if got := len(b.Owned()); got != testShards {
		t.Errorf("b owns %d shards after a is gone, want all %d", got, testShards)
	}
}

// TestAShardGivenUpWaitsForItsSyncsInFlight: when a replica joins and is
// assigned a shard, its old owner stops starting syncs at once, and
// releases the Lease only when the syncs in flight are done; the new owner
// starts only then, and is told which parents it gained.
func TestAShardGivenUpWaitsForItsSyncsInFlight(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	b := c.join(t, "b")
	moving := -1
	for s, owner := range Assign(testShards, []string{"a", "b"}) {
		if owner == "b" {
			moving = s
			break
		}
	}
	key := keyIn(moving)
	syncCtx, done, ok := a.Begin(context.Background(), key)
	if !ok {
		t.Fatalf("a does not own %s", key)
	}
	var gained []string
	b.OnGained(func(in func(string) bool) {
		if in(key) {
			gained = append(gained, key)
		}
	})
	for i := 0; i < 5; i++ {
		c.round(t, a, b)
	}
	if a.Owns(key) {
		t.Errorf("a still starts syncs of %s, a shard assigned to b", key)
	}
	if b.Owns(key) {
		t.Fatalf("b owns %s while a's sync of it is in flight", key)
	}
	if syncCtx.Err() != nil {
		t.Errorf("a's sync of %s was stopped, though a keeps renewing the shard until it ends: %v", key, context.Cause(syncCtx))
	}
	done()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		l, err := c.client.CoordinationV1().Leases(namespace).Get(context.Background(), "loop-shard-"+strconv.Itoa(moving), metav1.GetOptions{})
		return err == nil && holder(l) == "", nil
	}); err != nil {
		t.Fatalf("a did not release shard %d once its sync was done: %v", moving, err)
	}
	c.round(t, a, b)
	if !b.Owns(key) {
		t.Errorf("b does not own %s once a released it", key)
	}
	if len(gained) != 1 {
		t.Errorf("b was told of gaining %s %d times, want once", key, len(gained))
	}
}

// keyIn is a parent key in shard s.
func keyIn(s int) string {
	for i := 0; ; i++ {
		if key := fmt.Sprintf("ns/parent-%d", i); Of(key, testShards) == s {
			return key
		}
	}
}

// TestADeadReplicasMembershipLeaseIsDeletedInTime: a replica that died
// without leaving keeps its membership Lease while it might be live, and
// has it deleted a few lease durations later, not kept forever.
func TestADeadReplicasMembershipLeaseIsDeletedInTime(t *testing.T) {
	c := newCluster()
	a, b := c.join(t, "a"), c.join(t, "b")
	c.settle(t, a, b)
	a.cut.Store(true)
	died := c.clock.Now()
	var deleted time.Time
	for c.clock.Since(died) < (staleMembership+2)*leaseDuration && deleted.IsZero() {
		c.round(t, b)
		if _, err := c.client.CoordinationV1().Leases(namespace).Get(context.Background(), "loop-member-a", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			deleted = c.clock.Now()
		}
	}
	if deleted.IsZero() {
		t.Fatalf("a's membership Lease is still there %d lease durations after a died", staleMembership+2)
	}
	if d := deleted.Sub(died); d < staleMembership*leaseDuration {
		t.Errorf("a's membership Lease was deleted %s after a died, before %d lease durations", d, staleMembership)
	}
}

// TestAShardThatLapsedWhileItsRenewalWasUnderWayIsAGain: a renewal that
// succeeds after the renew deadline passed (a slow API server) keeps the
// Lease, but the shard was not owned meanwhile and its parents' events
// were dropped: its parents must be queued again, as for a shard acquired.
func TestAShardThatLapsedWhileItsRenewalWasUnderWayIsAGain(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	var gained []int
	a.OnGained(func(in func(string) bool) {
		for s := 0; s < testShards; s++ {
			if in(keyIn(s)) {
				gained = append(gained, s)
			}
		}
	})
	var slow atomic.Value
	c.client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		l := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Labels[RoleLabel] == roleShard && slow.CompareAndSwap(nil, l.Name) {
			// This one request ends past the renew deadline of the
			// last renewal (a round ago), and before that of its own.
			c.clock.Step(renewDeadline - retryPeriod + time.Second)
		}
		return false, nil, nil
	})
	a.step(context.Background())
	name, _ := slow.Load().(string)
	if name == "" {
		t.Fatal("no shard was renewed")
	}
	s, _ := strconv.Atoi(name[len("loop-shard-"):])
	if !a.Owns(keyIn(s)) {
		t.Fatalf("a does not own shard %d after renewing it", s)
	}
	found := false
	for _, g := range gained {
		found = found || g == s
	}
	if !found {
		t.Errorf("shard %d lapsed while its renewal was under way, and its parents were not queued again (gained %v)", s, gained)
	}
}

// TestAReplicaThatCannotReadTheGroupKeepsItsShards: when listing the
// group's Leases fails but writes go through, a replica renews the shards
// it holds (and acquires none): a failed read is no reason to stop
// syncing.
func TestAReplicaThatCannotReadTheGroupKeepsItsShards(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	c.client.PrependReactor("list", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the list is too slow today")
	})
	for i := 0; i < 2*int(leaseDuration/retryPeriod); i++ {
		c.round(t, a)
	}
	if got := len(a.Owned()); got != testShards {
		t.Errorf("a owns %d shards after failing to list the group for two lease durations, want all %d", got, testShards)
	}
}

// TestEveryReplicaSeesWhoHoldsEachShard: once settled, every replica's
// Holders names each shard's owner (as of its last round); a dead
// replica's shards are their new owner's once its Leases expired.
func TestEveryReplicaSeesWhoHoldsEachShard(t *testing.T) {
	c := newCluster()
	a, b, d := c.join(t, "a"), c.join(t, "b"), c.join(t, "d")
	c.settle(t, a, b, d)
	// A replica sees the Leases of the others as of its last round.
	c.round(t, a, b, d)
	want := make([]string, testShards)
	for _, r := range []*replica{a, b, d} {
		for _, s := range r.Owned() {
			want[s] = r.Identity()
		}
	}
	for _, r := range []*replica{a, b, d} {
		if got := r.Holders(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s sees the holders %v, want %v", r.Identity(), got, want)
		}
	}
	dead := d.Owned()
	d.cut.Store(true)
	c.settle(t, a, b)
	c.round(t, a, b)
	for _, r := range []*replica{a, b} {
		got := r.Holders()
		for _, s := range dead {
			if got[s] == "d" || got[s] == "" {
				t.Errorf("%s sees shard %d of the dead d held by %q, want a or b", r.Identity(), s, got[s])
			}
		}
	}
}

// TestAShardTakenBackIsANewHold: the rollout's gate counts a sync's result
// only under the hold of the shard it was made in, as another replica may
// have synced the parent while it held the shard; so a shard that leaves a
// replica and comes back has another epoch, and none while it is away.
func TestAShardTakenBackIsANewHold(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	b := c.join(t, "b")
	c.settle(t, a, b)
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("ns/p%d", i); b.Owns(k) {
			key = k
		}
	}
	first := b.Epoch(key)
	if first == 0 || a.Epoch(key) != 0 {
		t.Fatalf("b holds %s's shard with epoch %d, a with %d; want b's only", key, first, a.Epoch(key))
	}
	b.leave(context.Background())
	c.settle(t, a)
	if a.Epoch(key) == 0 || b.Epoch(key) != 0 {
		t.Fatalf("after b left, a's epoch for %s is %d and b's %d", key, a.Epoch(key), b.Epoch(key))
	}
	b = c.join(t, "b")
	c.settle(t, a, b)
	if again := b.Epoch(key); again == 0 || again == first {
		t.Errorf("b took %s's shard back with epoch %d, its first hold's was %d: want a new one", key, again, first)
	}
}
