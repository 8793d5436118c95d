package syncrequest

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// hookCache keeps each controller's webhook clients while its definition
// is unchanged: resolving credentials and TLS for every request would cost
// Secret reads and new connections each time.
type hookCache struct {
	secrets hooks.SecretSource
	mu      sync.Mutex
	byUID   map[types.UID]cachedHooks
}

type cachedHooks struct {
	resourceVersion string
	hooks           syncengine.Hooks
	webhooks        []*hooks.Webhook
}

func newHookCache(secrets hooks.SecretSource) *hookCache {
	return &hookCache{secrets: secrets, byUID: map[types.UID]cachedHooks{}}
}

func (c *hookCache) get(ctx context.Context, cc *v1alpha1.CompositeController) (syncengine.Hooks, error) {
	c.mu.Lock()
	cached, ok := c.byUID[cc.UID]
	c.mu.Unlock()
	if ok && cached.resourceVersion == cc.ResourceVersion && cc.ResourceVersion != "" {
		return cached.hooks, nil
	}
	built, webhooks, err := BuildHooks(ctx, cc, c.secrets)
	if err != nil {
		return syncengine.Hooks{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byUID[cc.UID]; ok {
		for _, w := range old.webhooks {
			w.CloseIdleConnections()
		}
	}
	c.byUID[cc.UID] = cachedHooks{resourceVersion: cc.ResourceVersion, hooks: built, webhooks: webhooks}
	return built, nil
}

// BuildHooks makes the webhook clients of a controller's sync, finalize and
// customize hooks.
func BuildHooks(ctx context.Context, cc *v1alpha1.CompositeController, secrets hooks.SecretSource) (syncengine.Hooks, []*hooks.Webhook, error) {
	var out syncengine.Hooks
	var all []*hooks.Webhook
	if cc.Spec.Hooks == nil {
		return out, nil, nil
	}
	build := func(name string, h *v1alpha1.Hook) (*hooks.Webhook, error) {
		if h == nil || h.Webhook == nil {
			return nil, nil
		}
		version := v1alpha1.HookVersionV1
		if h.Version != nil {
			version = *h.Version
		}
		w, err := hooks.New(ctx, hooks.Config{
			Controller: cc.Name, Hook: name, Webhook: h.Webhook, Version: version,
			EndpointConfigs: cc.Spec.EndpointConfigs, Secrets: secrets,
		})
		if err != nil {
			return nil, err
		}
		all = append(all, w)
		return w, nil
	}
	// Interfaces are set only for hooks that exist: a nil *Webhook in an
	// interface would not compare equal to nil.
	if w, err := build("sync", cc.Spec.Hooks.Sync); err != nil {
		return out, all, err
	} else if w != nil {
		out.Sync = w
	}
	if w, err := build("finalize", cc.Spec.Hooks.Finalize); err != nil {
		return out, all, err
	} else if w != nil {
		out.Finalize = w
	}
	if w, err := build("customize", cc.Spec.Hooks.Customize); err != nil {
		return out, all, err
	} else if w != nil {
		out.Customize = w
	}
	return out, all, nil
}
