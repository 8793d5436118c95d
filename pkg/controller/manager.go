// Package controller is the loop that makes every CompositeController real:
// for each one, compiled once per generation (pkg/definition, compiled again
// when discovery resolves one of its resources otherwise), informers on its
// parent and child resources, a rate-limited workqueue of parents, and
// workers that run the one reconcile step (pkg/reconcile) for each (the
// sample-controller pattern).
package controller

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/fieldowner"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	versionedscheme "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/scheme"
	informers "github.com/composite-apiserver/composite-apiserver/pkg/generated/informers/externalversions"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/reconcile"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/pkg/target"
)

// Config is what the loop needs.
type Config struct {
	// Dynamic, Metadata, Kube and Discovery reach the target cluster.
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
	Kube      kubernetes.Interface
	Discovery *target.Discovery
	// Client reaches this server's own API, for CompositeControllers.
	Client clientset.Interface
	// Workers is each controller's number of workers unless its spec
	// says otherwise.
	Workers int
	// StatusInterval is how often a controller's status is brought up to
	// date (and written only when it changed).
	StatusInterval time.Duration
	// ResyncPeriod is how often every parent is synced even when nothing
	// changed; 0 turns that off.
	ResyncPeriod time.Duration
	// Schemas compare desired children with what a controller applied.
	Schemas *fieldowner.Schemas
	// ControllerSelector, when set, restricts the loop to the
	// CompositeControllers it selects (Metacontroller's
	// --target-label-selector): the others are served by the API and run
	// by another installation.
	ControllerSelector labels.Selector
	// EventsQPS and EventsBurst limit the Events recorded per object and
	// reason; zero means client-go's defaults, which are Metacontroller's.
	EventsQPS   float32
	EventsBurst int
	// FinalizeGrace bounds how long a finalized parent keeps its finalizer
	// while its children's deletes fail; zero means the default.
	FinalizeGrace time.Duration
	// EchoTimeout is how long a parent waits for the watch event of one
	// of the loop's own writes before it is synced anyway; zero means
	// DefaultEchoTimeout.
	EchoTimeout time.Duration
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

// Manager runs one parent controller per CompositeController and restarts
// it when the definition's spec changes.
type Manager struct {
	cfg      Config
	secrets  hooks.SecretSource
	recorder record.EventRecorder
	// unchanged remembers the children found or applied converged, for
	// every controller: see fieldowner.Unchanged.
	unchanged *fieldowner.Unchanged
	ccLister  interface {
		Get(name string) (*v1alpha1.CompositeController, error)
	}
	dcLister interface {
		Get(name string) (*v1alpha1.DecoratorController, error)
	}

	// queue holds names of CompositeControllers whose controller must be
	// started, restarted or stopped; one worker does it, so a definition's
	// controller is never started twice.
	queue workqueue.TypedRateLimitingInterface[string]

	// pool holds the shared informers of every running controller, until
	// Run returns.
	pool *sharedinformers.Pool

	mu sync.Mutex
	// running are the controllers' loops, by their key in queue.
	running map[string]*controllerRun

	// waiting are controllers that could not start, retried whenever
	// discovery is refreshed. It has a lock of its own: a refresh happens
	// inside reconcile (a lookup that missed), under mu.
	waitingMu sync.Mutex
	waiting   map[string]bool
	// started are the names of the running controllers, for retryWaiting.
	started map[string]bool
	// recheck are running controllers whose author is to be checked
	// again (recheckAuthors).
	recheck map[string]bool

	// access checks controllers' subjects; serviceAccounts, that their
	// identities exist.
	access          rights.Access
	serviceAccounts *serviceAccounts
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
		cfg:     cfg,
		secrets: hooks.NewClusterSecretSource(cfg.Kube),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			// A controller that can't start yet (its CRD is being
			// installed) is retried within seconds, never minutes: the
			// discovery refresh requeues it too.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "compositecontrollers"}),
		running:   map[string]*controllerRun{},
		waiting:   map[string]bool{},
		started:   map[string]bool{},
		recheck:   map[string]bool{},
		unchanged: newUnchanged(cfg.Schemas),
		access:    rights.Access{Authorizer: cfg.Authorizer},
	}
	m.serviceAccounts = newServiceAccounts(m)
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
	m.pool = sharedinformers.NewPool(m.cfg.Dynamic, ctx.Done())
	defer utilruntime.HandleCrash()
	defer m.queue.ShutDown()

	broadcaster := reconcile.NewEventBroadcaster(ctx, m.cfg.EventsQPS, m.cfg.EventsBurst)
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.cfg.Kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	// Our scheme, so that Events about CompositeControllers name them;
	// parents are unstructured and name themselves.
	m.recorder = broadcaster.NewRecorder(versionedscheme.Scheme, corev1.EventSource{Component: "composite-apiserver"})

	var ccOptions []informers.SharedInformerOption
	if sel := m.cfg.ControllerSelector; sel != nil && !sel.Empty() {
		ccOptions = append(ccOptions, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	}
	ccInformers := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0, ccOptions...)
	ccInformer := ccInformers.Metacontroller().V1alpha1().CompositeControllers()
	m.ccLister = ccInformer.Lister()
	enqueue := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			m.queue.Add(key)
		}
	}
	if _, err := ccInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur interface{}) {
			// Our own status writes do not change the generation: only
			// spec changes restart a controller, and a new author (whose
			// rights its checks are made against).
			o, c := old.(*v1alpha1.CompositeController), cur.(*v1alpha1.CompositeController)
			if o.Generation != c.Generation || !equality.Semantic.DeepEqual(o.Status.Author, c.Status.Author) {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	dcInformer, err := m.watchDecorators(ccInformers)
	if err != nil {
		return err
	}
	ccInformers.Start(ctx.Done())
	logger.Info("Starting the CompositeController loop", "workersPerController", m.cfg.Workers)
	if !cache.WaitForCacheSync(ctx.Done(), ccInformer.Informer().HasSynced, dcInformer.HasSynced) {
		return fmt.Errorf("can't sync the CompositeController and DecoratorController informers")
	}
	m.cfg.Discovery.OnRefresh(m.retryWaiting)
	go m.noticeLeftovers(ctx)
	go m.recheckAuthors(ctx, m.cfg.AuthorRecheck)
	m.cfg.Caches.Lend(ctx, m.pool, m.ownership())
	go func() {
		for m.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	logger.Info("Stopping the CompositeController loop")
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, run := range m.running {
		run.stop()
		delete(m.running, name)
		m.setStarted(name, false)
	}
	return nil
}

// enqueueGained queues, in every running controller, the parents of shards
// this replica just gained: their previous owner may have left them
// half-synced, and their events before now went to it.
func (m *Manager) enqueueGained(gained func(key string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, run := range m.running {
		for _, pc := range run.pcs {
			pc.enqueueWhere(gained)
		}
	}
}

// forbiddenRetry is how soon a controller the server lacks rights for is
// checked again.
const forbiddenRetry = 5 * time.Second

// retryWaiting requeues every controller that could not start: discovery
// changed, and its resources may be served now. It requeues the running
// ones too, which reconcile restarts only when discovery now resolves their
// resources otherwise (definition.Stale). It runs inside reconcile (a lookup
// that missed refreshes discovery), under mu: running is read through the
// names kept in started, under waitingMu, not under mu.
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
	if err := m.reconcile(ctx, name); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Can't start a controller's loop", "controller", name)
		m.queue.AddRateLimited(name)
		return true
	}
	m.queue.Forget(name)
	return true
}

// reconcile makes the running loop of the controller of key (its kind and
// name, see kindOf) match its definition.
func (m *Manager) reconcile(ctx context.Context, key string) error {
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
		if current != nil {
			logger.Info(k.name + " is gone: stopping its loop")
			current.stop()
			delete(m.running, key)
			m.setStarted(key, false)
			m.event(current.owner, corev1.EventTypeNormal, "Stopped", "Stopped controller: "+name)
		}
		return nil
	}
	if current != nil && current.owner.GetUID() == obj.GetUID() && current.owner.GetGeneration() == obj.GetGeneration() &&
		equality.Semantic.DeepEqual(current.def.Author, k.author(obj)) &&
		!current.def.Stale(definition.RESTMapperResolver(m.cfg.Discovery.Known())) {
		// Unchanged: it runs on unless its author may no longer do what
		// it does, which starting it again refuses below.
		if stop, err := m.authorRevoked(ctx, key, current.def); !stop {
			return err
		}
	}
	if current != nil {
		logger.Info(k.name+" changed, or what discovery says of its resources: restarting its loop", "generation", obj.GetGeneration())
		current.stop()
		delete(m.running, key)
		m.setStarted(key, false)
		m.event(current.owner, corev1.EventTypeNormal, "Stopped", "Stopped controller: "+name)
	}
	run, err := newControllerRun(ctx, m, k, key, obj.DeepCopyObject().(controllerObject))
	var noStatus *noStatusError
	var forbidden *forbiddenError
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
	case err != nil:
		m.setWaiting(key, true)
		reason := "ConfigurationError"
		if errors.Is(err, errNotServed) {
			reason = "ResourceNotServed"
		}
		m.setNotReady(ctx, k, obj, reason, err)
		m.event(obj, corev1.EventTypeWarning, "CreateError", "Cannot create new controller: "+err.Error())
		return err
	}
	m.setWaiting(key, false)
	m.running[key] = run
	m.setStarted(key, true)
	run.start(ctx)
	m.event(obj, corev1.EventTypeNormal, "Started", "Started controller: "+name)
	return nil
}

func (m *Manager) ownership() engine.FieldOwnership {
	if m.unchanged == nil {
		return nil
	}
	return m.unchanged
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
	message := truncate(cause.Error(), 1024)
	generation := obj.GetGeneration()
	changed := true
	err := k.status(m).mutate(ctx, obj.GetName(), obj.GetUID(), func(s *trackedStatus) {
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
