package hooks

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/patches"
)

// ControllerHooks are the webhook clients of one CompositeController's
// sync, finalize and customize hooks and its patch pipeline, as the engine
// takes them.
type ControllerHooks struct {
	engine.Hooks
	webhooks []*Webhook
}

// Close releases the clients' idle connections; call it when the
// controller's definition is replaced or gone.
func (h *ControllerHooks) Close() {
	for _, w := range h.webhooks {
		w.CloseIdleConnections()
	}
}

// Build makes the webhook clients of a controller's hooks, as def resolved
// them. The loop builds them once per definition; /sync takes them from a
// ControllerCache.
func Build(ctx context.Context, def *definition.Definition, secrets SecretSource) (*ControllerHooks, error) {
	out := &ControllerHooks{}
	build := func(h *definition.Hook) (*Webhook, error) {
		if h == nil || h.Webhook == nil {
			return nil, nil
		}
		w, err := New(ctx, Config{
			Controller: def.Name, Hook: h.Name, Webhook: h.Webhook, Resolved: h,
			EndpointConfigs: def.EndpointConfigs, Secrets: secrets,
		})
		if err != nil {
			return nil, err
		}
		out.webhooks = append(out.webhooks, w)
		return w, nil
	}
	fail := func(err error) (*ControllerHooks, error) {
		out.Close()
		return nil, err
	}
	// Interfaces are set only for hooks that exist: a nil *Webhook in an
	// interface would not compare equal to nil.
	if w, err := build(def.Hooks.Sync); err != nil {
		return fail(err)
	} else if w != nil {
		out.Sync = w
	}
	if w, err := build(def.Hooks.Finalize); err != nil {
		return fail(err)
	} else if w != nil {
		out.Finalize = w
	}
	if w, err := build(def.Hooks.Customize); err != nil {
		return fail(err)
	} else if w != nil {
		out.Customize = w
	}
	// A patch hook is called as every other hook (url or service, TLS,
	// credentials, endpointConfigs, timeout, metrics), under the hook name
	// patch:<name>.
	if len(def.Hooks.Patches) == 0 {
		return out, nil
	}
	steps := make([]patches.Step, 0, len(def.Hooks.Patches))
	for _, p := range def.Hooks.Patches {
		step := patches.Step{Name: p.Name, EnabledIf: p.EnabledIf, Generator: p.Inline}
		if p.Webhook != nil {
			w, err := build(p.Webhook)
			if err != nil {
				return fail(err)
			}
			step.Generator = w
		}
		steps = append(steps, step)
	}
	out.Patches = patches.New(steps...)
	return out, nil
}

// PatchHookName is how the patch hook name is named as a hook: in errors,
// and in the hook label of the composite_hook_* metrics.
func PatchHookName(patch string) string { return definition.PatchHookName(patch) }

// ControllerCache keeps each controller's hooks while its spec is
// unchanged: resolving credentials and TLS for every request would cost
// Secret reads and new connections each time. It is keyed by generation,
// not resourceVersion, so that the loop's status writes do not rebuild it.
type ControllerCache struct {
	secrets SecretSource
	mu      sync.Mutex
	byUID   map[types.UID]cachedHooks
}

type cachedHooks struct {
	generation int64
	hooks      *ControllerHooks
}

// NewControllerCache returns an empty cache resolving credentials through
// secrets.
func NewControllerCache(secrets SecretSource) *ControllerCache {
	return &ControllerCache{secrets: secrets, byUID: map[types.UID]cachedHooks{}}
}

// Get returns def's hooks, building them when the controller is new or its
// spec changed.
func (c *ControllerCache) Get(ctx context.Context, def *definition.Definition) (*ControllerHooks, error) {
	c.mu.Lock()
	cached, ok := c.byUID[def.UID]
	c.mu.Unlock()
	if ok && cached.generation == def.Generation && def.UID != "" {
		return cached.hooks, nil
	}
	built, err := Build(ctx, def, c.secrets)
	if err != nil {
		return nil, err
	}
	if def.UID == "" {
		return built, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byUID[def.UID]; ok {
		old.hooks.Close()
	}
	c.byUID[def.UID] = cachedHooks{generation: def.Generation, hooks: built}
	return built, nil
}
