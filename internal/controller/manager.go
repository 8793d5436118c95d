// Package controller is the lifecycle of every CompositeController's and
// DecoratorController's loop: it follows both kinds, compiles each once per
// generation (internal/definition, compiled again when discovery resolves one of
// its resources otherwise), checks its identity and author, starts,
// restarts and stops its loop (internal/controller/parentloop), and keeps its
// status; with leader election, it runs on one replica at a time. The
// loop's pieces have packages of their own: sharedinformers, expectations,
// syncgate and parentloop; a rollout's driver is rolloutdriver (its
// decisions, internal/rollout), the status tracker controllerstatus, leader
// election leader.
package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/controllerstatus"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/rolloutdriver"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	versionedscheme "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/scheme"
	informers "github.com/composite-apiserver/composite-apiserver/pkg/generated/informers/externalversions"
)

// Config is what the loop needs.
type Config struct {
	// Dynamic, Metadata, Kube and Discovery reach the target cluster.
	Dynamic dynamic.Interface
	// Informers is the dynamic client the loop's shared informers list
	// and watch through (target.Cluster.Informers).
	Informers dynamic.Interface
	Metadata  metadata.Interface
	Kube      kubernetes.Interface
	Discovery *target.Discovery
	// Client reaches this server's own API, for CompositeControllers and
	// DecoratorControllers.
	Client clientset.Interface
	// Settings are the loops' settings, carried whole to each loop.
	parentloop.Settings
	// StatusInterval is how often a controller's status is brought up to
	// date (and written only when it changed).
	StatusInterval time.Duration
	// Schemas compare desired children with what a controller applied.
	Schemas *fieldowner.Schemas
	// ControllerSelector, when set, restricts the loop to the
	// controllers of either kind it selects (Metacontroller's
	// --target-label-selector): the others are served by the API and run
	// by another installation.
	ControllerSelector labels.Selector
	// HookDestinations are the address ranges hooks may not be called at.
	HookDestinations hooks.Destinations
	// Authorizer answers whether a controller's subject (its identity or
	// author) may do something: the server's delegated authorizer, whose
	// SubjectAccessReviews are cached.
	Authorizer authorizer.Authorizer
	// Impersonator makes the clients of controllers with an identity.
	Impersonator Impersonator
	// Identity is the operator's policy on controller identities.
	Identity rights.IdentityPolicy
	// Caches, when set, lends the loop's informer caches while it runs.
	Caches *sharedinformers.Caches
	// Shards, when set, is this replica's share of the parents: the loop
	// syncs only those (see syncgate.ParentShards).
	Shards syncgate.ParentShards
	// AuthorRecheck is how often the recorded author of every running
	// controller is checked again; zero means DefaultAuthorRecheck.
	AuthorRecheck time.Duration
	// Gate is where the workers take turns on a parent with a live /sync
	// of this replica; nil for none.
	Gate *syncgate.Gate
}

// Manager runs one loop per CompositeController and DecoratorController,
// and starts it again when the controller's spec changes.
type Manager struct {
	cfg      Config
	recorder record.EventRecorder
	// unchanged remembers the children found or applied converged, for
	// every controller: see fieldowner.Unchanged.
	unchanged *fieldowner.Unchanged
	ccLister  getter[*v1alpha1.CompositeController]
	dcLister  getter[*v1alpha1.DecoratorController]
	// identities work out whom each controller's loop acts as.
	identities *identities
	// group is Config.Shards as rollouts need it (rolloutshards.go), nil
	// without --shards.
	group rolloutdriver.ShardGroup
	// loops is what every controller's loop shares, once Run has made
	// the recorder and the shared informers.
	loops parentloop.Config

	// queue holds the keys (kindOf) of controllers whose loop must be
	// started, restarted or stopped; one worker does it, so a
	// controller's loop is never started twice.
	queue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// running are the controllers' loops, by their key in queue.
	running map[string]*running

	// waiting are controllers that could not start, retried whenever
	// discovery is refreshed. It has a lock of its own: a refresh happens
	// inside updateRun (a lookup that missed), under mu.
	waitingMu sync.Mutex
	waiting   map[string]bool
	// started are the names of the running controllers, for retryWaiting.
	started map[string]bool
	// recheck are running controllers whose author is to be checked
	// again (recheckAuthors).
	recheck map[string]bool
}

// running is a controller whose loop runs: as written, as compiled, and
// its loop.
type running struct {
	owner controllerObject
	def   *definition.Definition
	loop  *parentloop.Run
	// tracker writes the controller's status; revision is the one loop
	// runs, the update revision during a rollout.
	tracker  *controllerstatus.Tracker
	revision int64
	// rollout, during a rollout, runs the previous revision's loop
	// beside loop, and moves the steps (rollout.go).
	rollout *rolloutRun
}

// start runs the controller's loops.
func (r *running) start(ctx context.Context) {
	r.loop.Start(ctx)
	if r.rollout != nil {
		r.rollout.Start(ctx)
	}
}

// broken tells whether the controller's rollout driver panicked: it is
// run anew from its stored status.
func (r *running) broken() bool {
	return r.rollout != nil && r.rollout.ctl.broken.Load()
}

// defs are the definitions the controller runs: its spec's and, during a
// rollout, the revision's its parents not yet moved run.
func (r *running) defs() []*definition.Definition {
	if r.rollout != nil && r.rollout.previousDef != nil {
		return []*definition.Definition{r.def, r.rollout.previousDef}
	}
	return []*definition.Definition{r.def}
}

// stop ends the controller's loops.
func (r *running) stop() {
	if r.rollout != nil {
		r.rollout.Stop()
	}
	r.loop.Stop()
}

// NewManager returns a Manager; Run starts it.
func NewManager(cfg Config) *Manager {
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 5 * time.Second
	}
	if cfg.AuthorRecheck <= 0 {
		cfg.AuthorRecheck = DefaultAuthorRecheck
	}
	m := &Manager{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			// A controller that can't start yet (its CRD is being
			// installed) is retried within seconds, never minutes: the
			// discovery refresh requeues it too.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "compositecontrollers"}),
		running:    map[string]*running{},
		waiting:    map[string]bool{},
		started:    map[string]bool{},
		recheck:    map[string]bool{},
		unchanged:  newUnchanged(cfg.Schemas),
		identities: newIdentities(cfg),
	}
	m.group, _ = cfg.Shards.(rolloutdriver.ShardGroup)
	if cfg.Shards != nil {
		// Before the replica acquires any shard: a gain unheard of would
		// leave parents listed before it unsynced until the next resync.
		cfg.Shards.OnGained(func(gained func(key string) bool) {
			// Not in the caller's goroutine: it renews Leases, and
			// must not wait for mu, held while a controller starts.
			go m.enqueueGained(gained)
		})
	}
	return m
}

// Run runs the loop until ctx is done, then stops every controller.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("controller")
	ctx = klog.NewContext(ctx, logger)
	defer utilruntime.HandleCrash()
	defer m.queue.ShutDown()

	broadcaster := reconcile.NewEventBroadcaster(ctx, m.cfg.EventsQPS, m.cfg.EventsBurst)
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.cfg.Kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	// Our scheme, so that Events about CompositeControllers name them;
	// parents are unstructured and name themselves.
	m.recorder = broadcaster.NewRecorder(versionedscheme.Scheme, corev1.EventSource{Component: "composite-apiserver"})
	m.loops = m.loopConfig(sharedinformers.NewPool(m.cfg.Informers, ctx.Done()))

	synced, err := m.watchControllers(ctx)
	if err != nil {
		return err
	}
	logger.Info("Starting the CompositeController loop", "workersPerController", m.cfg.Workers)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("can't sync the CompositeController and DecoratorController informers")
	}
	m.cfg.Discovery.OnRefresh(m.retryWaiting)
	go m.noticeLeftovers(ctx)
	go m.recheckAuthors(ctx, m.cfg.AuthorRecheck)
	m.cfg.Caches.Lend(ctx, m.loops.Informers, m.loops.Ownership())
	go func() {
		for m.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	logger.Info("Stopping the CompositeController loop")
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, r := range m.running {
		r.stop()
		delete(m.running, key)
		m.setStarted(key, false)
	}
	return nil
}

// loopConfig is what every controller's loop shares, with the shared
// informers of pool.
func (m *Manager) loopConfig(pool *sharedinformers.Pool) parentloop.Config {
	return parentloop.Config{
		Dynamic: m.cfg.Dynamic, Metadata: m.cfg.Metadata, Kube: m.cfg.Kube, Discovery: m.cfg.Discovery,
		Informers: pool, Recorder: m.recorder, Secrets: hooks.NewClusterSecretSource(m.cfg.Kube),
		HookDestinations: m.cfg.HookDestinations, Access: m.identities.access, Identity: m.identities,
		Unchanged: m.unchanged, Settings: m.cfg.Settings, Gate: m.cfg.Gate, Shards: m.cfg.Shards,
	}
}

// watchControllers has the manager's queue follow the controllers of
// every kind, under their kind's keys, and returns what tells when their
// informers have synced.
func (m *Manager) watchControllers(ctx context.Context) ([]cache.InformerSynced, error) {
	var options []informers.SharedInformerOption
	if sel := m.cfg.ControllerSelector; sel != nil && !sel.Empty() {
		options = append(options, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0, options...)
	var synced []cache.InformerSynced
	for _, k := range kinds {
		enqueue := func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				m.queue.Add(k.keyPrefix + key)
			}
		}
		inf := k.watch(m, factory)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue,
			UpdateFunc: func(old, cur interface{}) {
				if k.restartsOn(old.(controllerObject), cur.(controllerObject)) {
					enqueue(cur)
				}
			},
			DeleteFunc: enqueue,
		}); err != nil {
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	return synced, nil
}

// enqueueGained queues, in every running controller, the parents of shards
// this replica just gained: their previous owner may have left them
// half-synced, and their events before now went to it.
func (m *Manager) enqueueGained(gained func(key string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.running {
		r.loop.EnqueueWhere(gained)
		if r.rollout != nil {
			r.rollout.previous.EnqueueWhere(gained)
		}
	}
}

// forbiddenRetry is how soon a controller the server lacks rights for is
// checked again.
const forbiddenRetry = 5 * time.Second

// retryWaiting requeues every controller that could not start: discovery
// changed, and its resources may be served now. It requeues the running
// ones too, which updateRun restarts only when discovery now resolves their
// resources otherwise (definition.Stale). It runs inside updateRun (a
// lookup that missed refreshes discovery), under mu: running is read
// through the names kept in started, under waitingMu, not under mu.
func (m *Manager) retryWaiting() {
	m.waitingMu.Lock()
	defer m.waitingMu.Unlock()
	for name := range m.waiting {
		m.queue.Add(name)
	}
	for name := range m.started {
		m.queue.Add(name)
	}
}

func (m *Manager) setWaiting(name string, waiting bool) {
	m.waitingMu.Lock()
	defer m.waitingMu.Unlock()
	setMember(m.waiting, name, waiting)
}

func (m *Manager) setStarted(name string, started bool) {
	m.waitingMu.Lock()
	defer m.waitingMu.Unlock()
	setMember(m.started, name, started)
}

func setMember(set map[string]bool, name string, member bool) {
	if member {
		set[name] = true
	} else {
		delete(set, name)
	}
}

func (m *Manager) processNext(ctx context.Context) bool {
	name, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(name)
	if err := m.recoveredUpdateRun(ctx, name); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Can't start a controller's loop", "controller", name)
		m.queue.AddRateLimited(name)
		return true
	}
	m.queue.Forget(name)
	return true
}

// recoveredUpdateRun is updateRun with a panic recovered: one controller's
// panic is its own failure, retried with the queue's capped backoff, and
// the manager goes on with every other controller. updateRun releases mu
// in a defer, as the panic unwinds.
func (m *Manager) recoveredUpdateRun(ctx context.Context, key string) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			perr := &parentloop.PanicError{Recovered: rec, Stack: debug.Stack()}
			klog.FromContext(ctx).Error(perr, "Recovered a panic in a controller's lifecycle", "controller", key, "stack", string(perr.Stack))
			parentloop.CountPanic(key)
			k, name := kindOf(key)
			if obj, gerr := k.get(m, name); gerr == nil {
				m.setNotReady(ctx, k, obj, "Panicked", perr)
				m.event(obj, corev1.EventTypeWarning, "Panicked", perr.Error())
			}
			err = perr
		}
	}()
	return m.updateRun(ctx, key)
}

// updateRun starts, restarts or stops the loop of the controller of key
// (its kind and name, see kindOf) so that it runs the controller's
// current definition, or none when the controller is gone.
func (m *Manager) updateRun(ctx context.Context, key string) error {
	k, name := kindOf(key)
	logger := klog.FromContext(ctx).WithValues(strings.ToLower(k.name), name)
	obj, err := k.get(m, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	current := m.running[key]
	if obj == nil || obj.GetDeletionTimestamp() != nil {
		m.setWaiting(key, false)
		m.forgetRecheck(key)
		if current != nil {
			logger.Info(k.name + " is gone: stopping its loop")
			m.stopRun(key, current)
		}
		return nil
	}
	if current != nil && m.unchangedRun(k, current, obj) && !current.broken() {
		// Unchanged: it runs on unless its author (or the author of the
		// revision its rollout's parents not yet moved run, R10) may no
		// longer do what it does, which starting it again refuses below.
		// Its rollout follows the spec.
		if err := m.followRollout(ctx, k, current, obj); err != nil {
			return err
		}
		if stop, err := m.authorRevoked(ctx, key, current.defs()...); !stop {
			return err
		}
	}
	if m.awaitsDriver(k, key, obj) {
		// Until the rollout's driver has said how the new revision lands,
		// the running loop goes on.
		m.queue.AddAfter(key, time.Second)
		return nil
	}
	if current != nil {
		logger.Info(k.name+" changed, or what discovery says of its resources: restarting its loop", "generation", obj.GetGeneration())
	}
	run, err := m.newRun(ctx, k, key, obj.DeepCopyObject().(controllerObject), current)
	if err != nil && current != nil && !current.broken() && isRolloutStatusError(err) {
		// The new revision's rollout could not be recorded (a conflict,
		// a timeout): the loop running goes on until it is, rather than
		// no loop at all (R21).
		return err
	}
	if current != nil {
		if run != nil && run.rollout != nil && run.rollout.previous == current.loop {
			// Its loop runs on as the previous revision's of the
			// rollout begun: its parents are not synced again.
			current.tracker.Retire(run.tracker)
		} else {
			m.stopRun(key, current)
		}
	}
	if err != nil {
		return m.notStarted(ctx, logger, k, key, obj, err)
	}
	m.setWaiting(key, false)
	m.running[key] = run
	m.setStarted(key, true)
	run.start(ctx)
	m.event(obj, corev1.EventTypeNormal, "Started", "Started controller: "+name)
	return nil
}

// awaitsDriver tells whether, with --shards, this replica must wait for
// the driver of the controller obj's rollout (the holder of its driverKey's
// shard) to begin the rollout of its new revision: until its status does,
// a replica that ran the revision before runs it on, and a replica that
// does not drive can't tell which parents the new one runs.
func (m *Manager) awaitsDriver(k kind, key string, obj controllerObject) bool {
	if m.group == nil {
		return false
	}
	revs := revisionsOf(obj)
	return revs.rollout != nil && (revs.status == nil || revs.status.UpdateRevision != revs.revision) && !m.group.Owns(rolloutdriver.DriverKey(key))
}

// unchangedRun tells whether the running loop r runs obj as it is now,
// with its resources as discovery resolves them now.
func (m *Manager) unchangedRun(k kind, r *running, obj controllerObject) bool {
	return r.owner.GetUID() == obj.GetUID() && r.revision == revisionsOf(obj).revision &&
		equality.Semantic.DeepEqual(r.def.Author, obj.GetAuthor()) &&
		!r.def.Stale(definition.RESTMapperResolver(m.cfg.Discovery.Known()))
}

// stopRun stops the running loop r of the controller of key; under mu.
func (m *Manager) stopRun(key string, r *running) {
	r.stop()
	delete(m.running, key)
	m.setStarted(key, false)
	m.event(r.owner, corev1.EventTypeNormal, "Stopped", "Stopped controller: "+r.def.Name)
}

// newRun compiles owner, a controller of kind k, checks its author, and
// makes its loop, reporting to a new status tracker, with the rollout it
// runs, begun from current, the controller's loop until now (nil for
// none), which the rollout may take on as its previous revision's.
func (m *Manager) newRun(ctx context.Context, k kind, key string, owner controllerObject, current *running) (*running, error) {
	def, err := definition.Compile(owner, definition.RESTMapperResolver(m.cfg.Discovery))
	if err != nil {
		return nil, err
	}
	if err := m.checkAuthor(ctx, def); err != nil {
		return nil, err
	}
	status := controllerstatus.New(owner, k.status(m), m.cfg.StatusInterval, len(def.Parents()))
	status.Event = func(eventType, reason, message string) { m.event(owner, eventType, reason, message) }
	loop, err := parentloop.NewRun(ctx, &m.loops, key, owner, def, status)
	if err != nil {
		return nil, err
	}
	status.Counts = loop.Counts
	r := &running{owner: owner, def: def, loop: loop, tracker: status, revision: revisionsOf(owner).revision}
	if err := m.withRollout(ctx, k, key, r, current); err != nil {
		loop.Close()
		return nil, err
	}
	return r, nil
}

// notStarted says, in the controller's status and an Event, why its loop
// could not start (err), and has it retried as the reason wants.
func (m *Manager) notStarted(ctx context.Context, logger klog.Logger, k kind, key string, obj controllerObject, err error) error {
	name := obj.GetName()
	var noStatus *parentloop.NoStatusError
	var forbidden *parentloop.ForbiddenError
	var noAuthor *authorUnknownError
	switch {
	case errors.As(err, &noAuthor):
		// Nothing to retry: writing the controller again requeues it.
		reason := "AuthorUnknown"
		if errors.Is(noAuthor.err, rights.ErrIdentityRequired) {
			reason = "IdentityRequired"
		}
		if m.setNotReady(ctx, k, obj, reason, err) {
			logger.Info("Not running the controller", "reason", reason)
			m.event(obj, corev1.EventTypeWarning, reason, err.Error())
		}
		return nil
	case errors.As(err, &noStatus):
		// As Metacontroller: no loop for such a parent, and an Event that
		// says why; a CRD updated to have a status is picked up by the next
		// discovery refresh.
		logger.Info("Not running the controller: its parent resource has no status subresource", "err", err)
		m.setWaiting(key, true)
		if m.setNotReady(ctx, k, obj, "NoStatusSubresource", err) {
			m.event(obj, corev1.EventTypeWarning, "SyncError", fmt.Sprintf("[%s] Sync error - ignoring: %v", name, err))
		}
		return nil
	case errors.As(err, &forbidden):
		// Rights are granted at any moment (an admin applies a
		// ClusterRole): look again soon, without backoff, and start then.
		m.setWaiting(key, true)
		if m.setNotReady(ctx, k, obj, "Forbidden", err) {
			logger.Info("Not running the controller: the server lacks rights", "missing", err.Error())
			m.event(obj, corev1.EventTypeWarning, "Forbidden", err.Error())
		}
		m.queue.AddAfter(key, forbiddenRetry)
		return nil
	}
	m.setWaiting(key, true)
	reason := "ConfigurationError"
	if errors.Is(err, parentloop.ErrNotServed) {
		reason = "ResourceNotServed"
	}
	m.setNotReady(ctx, k, obj, reason, err)
	m.event(obj, corev1.EventTypeWarning, "CreateError", "Cannot create new controller: "+err.Error())
	return err
}

// unchangedChildren is how many children the loop remembers as converged:
// more than a large cluster's controllers own (about 150 bytes each).
const unchangedChildren = 200_000

func newUnchanged(schemas *fieldowner.Schemas) *fieldowner.Unchanged {
	if schemas == nil {
		return nil
	}
	return fieldowner.NewUnchanged(schemas, unchangedChildren)
}

// event records an Event on a controller, as Metacontroller does for its
// controllers' lifecycle.
func (m *Manager) event(obj runtime.Object, eventType, reason, message string) {
	if m.recorder != nil {
		m.recorder.Event(obj, eventType, reason, message)
	}
}

// setNotReady says in the controller's status why its loop can't run,
// e.g. a resource the cluster does not serve or a missing Secret. It
// writes only when that changes the Ready condition, and says whether it
// did.
func (m *Manager) setNotReady(ctx context.Context, k kind, obj controllerObject, reason string, cause error) bool {
	message := controllerstatus.Truncate(cause.Error(), 1024)
	generation := obj.GetGeneration()
	changed := true
	err := k.status(m).Mutate(ctx, obj.GetName(), obj.GetUID(), func(s *controllerstatus.Status) {
		if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse &&
			c.Reason == reason && c.Message == message && c.ObservedGeneration == generation {
			changed = false
			return
		}
		s.ObservedGeneration = generation
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
			Message: message, ObservedGeneration: generation,
		})
		s.LastSyncError = message
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't write the controller's status", "controller", obj.GetName(), "err", err)
	}
	return changed
}
