package hooks

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
	"github.com/composite-apiserver/composite-apiserver/pkg/patches"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// ControllerHooks are the webhook clients of one CompositeController's
// sync, finalize and customize hooks and its patch pipeline, as the engine
// takes them.
type ControllerHooks struct {
	syncengine.Hooks
	webhooks []*Webhook
}

// Close releases the clients' idle connections; call it when the
// controller's definition is replaced or gone.
func (h *ControllerHooks) Close() {
	for _, w := range h.webhooks {
		w.CloseIdleConnections()
	}
}

// Build makes the webhook clients of a controller's hooks. The loop builds
// them once per definition; /sync takes them from a ControllerCache.
func Build(ctx context.Context, cc *v1alpha1.CompositeController, secrets SecretSource) (*ControllerHooks, error) {
	out := &ControllerHooks{}
	if cc.Spec.Hooks == nil {
		return out, nil
	}
	build := func(name string, h *v1alpha1.Hook) (*Webhook, error) {
		if h == nil || h.Webhook == nil {
			return nil, nil
		}
		version := v1alpha1.HookVersionV1
		if h.Version != nil {
			version = *h.Version
		}
		w, err := New(ctx, Config{
			Controller: cc.Name, Hook: name, Webhook: h.Webhook, Version: version,
			EndpointConfigs: cc.Spec.EndpointConfigs, Secrets: secrets,
		})
		if err != nil {
			return nil, err
		}
		out.webhooks = append(out.webhooks, w)
		return w, nil
	}
	// Interfaces are set only for hooks that exist: a nil *Webhook in an
	// interface would not compare equal to nil.
	if w, err := build(syncengine.HookSync, cc.Spec.Hooks.Sync); err != nil {
		out.Close()
		return nil, err
	} else if w != nil {
		out.Sync = w
	}
	if w, err := build(syncengine.HookFinalize, cc.Spec.Hooks.Finalize); err != nil {
		out.Close()
		return nil, err
	} else if w != nil {
		out.Finalize = w
	}
	if w, err := build(syncengine.HookCustomize, cc.Spec.Hooks.Customize); err != nil {
		out.Close()
		return nil, err
	} else if w != nil {
		out.Customize = w
	}
	// A patch hook is called as every other hook (url or service, TLS,
	// credentials, endpointConfigs, timeout, metrics), under the hook name
	// patch:<name>, but without ETags: its answer depends on the children
	// the sync hook returned, not only on the parent an ETag is kept for.
	pipeline, err := patches.Build(cc, func(name string, wh *v1alpha1.Webhook) (hookapi.Generator, error) {
		wh = wh.DeepCopy()
		wh.Etag = nil
		if wh.ResponseUnMarshallMode == nil {
			// The default of patch hooks (SetDefaults_PatchHook).
			strict := v1alpha1.ResponseUnmarshallModeStrict
			wh.ResponseUnMarshallMode = &strict
		}
		return build(PatchHookName(name), &v1alpha1.Hook{Webhook: wh})
	})
	if err != nil {
		out.Close()
		return nil, err
	}
	out.Patches = pipeline
	return out, nil
}

// PatchHookName is how the patch hook name is named as a hook: in errors,
// and in the hook label of the composite_hook_* metrics.
func PatchHookName(patch string) string {
	return "patch:" + patch
}

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

// Get returns cc's hooks, building them when cc is new or its spec changed.
func (c *ControllerCache) Get(ctx context.Context, cc *v1alpha1.CompositeController) (*ControllerHooks, error) {
	c.mu.Lock()
	cached, ok := c.byUID[cc.UID]
	c.mu.Unlock()
	if ok && cached.generation == cc.Generation && cc.UID != "" {
		return cached.hooks, nil
	}
	built, err := Build(ctx, cc, c.secrets)
	if err != nil {
		return nil, err
	}
	if cc.UID == "" {
		return built, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byUID[cc.UID]; ok {
		old.hooks.Close()
	}
	c.byUID[cc.UID] = cachedHooks{generation: cc.Generation, hooks: built}
	return built, nil
}
