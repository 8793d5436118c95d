package syncrequest

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// controllerIdle is how long a controller nobody syncs stays compiled:
// long enough for a user iterating on previews, short enough that deleted
// controllers (which /sync is never told about, on any replica) go.
const controllerIdle = 10 * time.Minute

// controllers keeps each controller /sync is asked about compiled,
// with its hooks built, while its spec is unchanged: compiling and
// resolving credentials and TLS for every request would cost Secret reads
// and new connections each time. It is keyed by generation, not
// resourceVersion, so that the loop's status writes do not rebuild it, and
// it forgets a controller not synced for controllerIdle.
type controllers struct {
	secrets hooks.SecretSource
	dest    hooks.Destinations
	now     func() time.Time

	mu    sync.Mutex
	byUID map[types.UID]*compiled
	swept time.Time
}

type compiled struct {
	generation int64
	def        *definition.Definition
	hooks      *hooks.ControllerHooks
	used       time.Time
}

// compileError is a controller that does not compile: the request's fault
// (a 400), where a hook that can't be built is the hook's (a 502).
type compileError struct{ error }

func (e compileError) Unwrap() error { return e.error }

func newControllers(secrets hooks.SecretSource, dest hooks.Destinations) *controllers {
	return &controllers{secrets: secrets, dest: dest, now: time.Now, byUID: map[types.UID]*compiled{}}
}

// get returns controller (a v1alpha1 CompositeController or
// DecoratorController) compiled with resolver and its hooks, building them
// when the controller is new or its spec changed. A controller without a
// uid (not stored) is built each time and not kept: the caller closes
// nothing either way, the cache does when it drops an entry.
//
// secretsFor, when set, is asked on every call, before any credential is
// read: it refuses a controller whose subject may not read them, and says
// where they are read from (as the controller's identity, when it has one).
func (c *controllers) get(ctx context.Context, controller runtime.Object, resolver definition.KindResolver, secretsFor secretsFunc) (*definition.Definition, *hooks.ControllerHooks, error) {
	return c.getCompiled(ctx, controller, func() (*definition.Definition, error) { return definition.Compile(controller, resolver) }, secretsFor)
}

// secretsFunc refuses a compiled controller or says where its hooks'
// credentials are read.
type secretsFunc func(*definition.Definition) (hooks.SecretSource, error)

// getCompiled is get with the controller compiled by compile, called only
// when no kept one serves: a caller that compiled it already passes what
// it has. A kept one serves while the generation and the author (which the
// server records without a new generation) are the same.
func (c *controllers) getCompiled(ctx context.Context, controller runtime.Object, compile func() (*definition.Definition, error), secretsFor secretsFunc) (*definition.Definition, *hooks.ControllerHooks, error) {
	if secretsFor == nil {
		secretsFor = func(*definition.Definition) (hooks.SecretSource, error) { return c.secrets, nil }
	}
	obj, err := meta.Accessor(controller)
	if err != nil {
		return nil, nil, compileError{err}
	}
	uid, generation, author := obj.GetUID(), obj.GetGeneration(), definition.AuthorOf(controller)
	if rev := revisionOf(controller); uid != "" && rev != 0 {
		// During a rollout two revisions of one controller are synced:
		// each is kept apart.
		uid = types.UID(fmt.Sprintf("%s@%d", uid, rev))
	}
	now := c.now()
	c.mu.Lock()
	c.sweepLocked(now)
	if e, ok := c.byUID[uid]; ok && uid != "" && e.generation == generation && apiequality.Semantic.DeepEqual(e.def.Author, author) {
		e.used = now
		c.mu.Unlock()
		if _, err := secretsFor(e.def); err != nil {
			return nil, nil, err
		}
		return e.def, e.hooks, nil
	}
	c.mu.Unlock()
	def, err := compile()
	if err != nil {
		return nil, nil, compileError{err}
	}
	secrets, err := secretsFor(def)
	if err != nil {
		return nil, nil, err
	}
	built, err := hooks.Build(ctx, def, secrets, c.dest)
	if err != nil {
		return nil, nil, err
	}
	if uid == "" {
		return def, built, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byUID[uid]; ok {
		old.hooks.Close()
	}
	c.byUID[uid] = &compiled{generation: generation, def: def, hooks: built, used: now}
	return def, built, nil
}

// sweepLocked drops, at most once a minute, the controllers not synced for
// controllerIdle, closing their hooks' idle connections.
func (c *controllers) sweepLocked(now time.Time) {
	if now.Sub(c.swept) < time.Minute {
		return
	}
	c.swept = now
	for uid, e := range c.byUID {
		if now.Sub(e.used) > controllerIdle {
			e.hooks.Close()
			delete(c.byUID, uid)
		}
	}
}

// len is how many controllers are kept, for tests.
func (c *controllers) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byUID)
}
