// Package parentloop is the loop of one running controller: informers on
// its parent, child and related resources, event handlers that filter
// parent updates by named predicates and map a child's event to its
// owner, a rate-limited queue of parents with lanes, and workers that run
// the one reconcile step (internal/reconcile) for each parent (the
// sample-controller pattern). A CompositeController has one parent loop; a
// DecoratorController one per resource, sharing one queue and its
// workers (Run).
package parentloop

import (
	"context"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// Settings are the loop's settings, made once from the server's flags
// (internal/cmd/server) and carried whole through the server's and the
// manager's configuration to every controller's loop: a new setting is one
// field here and its flag, not a field in four structs copied by hand.
type Settings struct {
	// Workers is each controller's number of workers unless its spec
	// says otherwise.
	Workers int
	// ResyncPeriod is how often every parent is synced even when nothing
	// changed; 0 turns that off.
	ResyncPeriod time.Duration
	// FinalizeGrace bounds how long a finalized parent keeps its finalizer
	// while its children's deletes fail; zero means the default.
	FinalizeGrace time.Duration
	// EchoTimeout bounds the expectations' wait for the watch event (echo)
	// of one of the loop's own writes; zero means DefaultEchoTimeout.
	EchoTimeout time.Duration
	// StopGrace is how long a sync in flight when the loop stops (a
	// leader stepping down, the process ending) may go on, to finish its
	// hook call and writes, before it is cancelled (Run.Stop); zero
	// cancels it at once.
	StopGrace time.Duration
	// EventsQPS and EventsBurst limit the Events recorded per object and
	// reason (the manager's recorder); zero means client-go's defaults,
	// which are Metacontroller's.
	EventsQPS   float32
	EventsBurst int
	// ChildEventsQPS and ChildEventsBurst are each controller's budget of
	// the Normal Events that say what its syncs did to children
	// (eventbudget); ChildEventsQPS ≤ 0 records every one.
	ChildEventsQPS   float32
	ChildEventsBurst int
}

// Config is what every controller's loop shares: the manager's clients,
// informers and the loop's Settings.
type Config struct {
	Settings
	Dynamic          dynamic.Interface
	Metadata         metadata.Interface
	Kube             kubernetes.Interface
	Discovery        *target.Discovery
	HookDestinations hooks.Destinations
	Gate             *syncgate.Gate
	Shards           syncgate.ParentShards

	// Informers are the shared informers every loop takes its own from.
	Informers *sharedinformers.Pool
	// Recorder records the Events of parents and controllers.
	Recorder record.EventRecorder
	// Secrets is where the hooks' credentials are read for controllers
	// without an identity.
	Secrets hooks.SecretSource
	// Access checks the controllers' subjects' rights.
	Access rights.Access
	// Identity works out whom each controller's loop acts as.
	Identity Identity
	// Unchanged remembers the children found or applied converged, for
	// every controller (fieldowner.Unchanged); nil compares every child.
	Unchanged *fieldowner.Unchanged
}

// Ownership is the field-ownership comparison the loop's syncs share,
// which remembers the children found converged; nil for none.
func (c *Config) Ownership() engine.FieldOwnership {
	if c.Unchanged == nil {
		// A nil *Unchanged must stay a nil interface.
		return nil
	}
	return c.Unchanged
}

// DefaultEchoTimeout is how long the expectations wait for the echo of one
// of the loop's writes before the parent is synced anyway
// (Config.EchoTimeout, --echo-timeout). Watch events normally arrive
// within milliseconds; a lost one is a watch that relisted past it.
const DefaultEchoTimeout = time.Minute

// Status is where a controller's loop reports how it runs: the manager's
// status tracker, which writes the controller's status.
type Status interface {
	// Started says one parent loop's informers synced.
	Started(message string)
	// HookCalled says whether the hooks answered the last sync.
	HookCalled(err error)
	// Authorized says whether the last sync could read and write all it
	// needed as the controller's subject.
	Authorized(err error)
	// Synced says how the last sync of the parent of key ended.
	Synced(key string, err error)
	// Panicked says a sync of the parent of key panicked (err, a
	// *PanicError), or, with nil, that it ended without.
	Panicked(key string, err error)
	// Run writes the status now and then until ctx is done; the
	// controller's first parent loop calls it once its informers synced.
	Run(ctx context.Context)
}
