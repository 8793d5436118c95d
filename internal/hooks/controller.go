package hooks

import (
	"context"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
)

// ControllerHooks are the webhook clients of one controller's sync,
// finalize and customize hooks and its patch pipeline, as the engine takes
// them.
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
// them. The loop builds them once per definition; /sync keeps them per
// controller (internal/syncrequest's controllers).
func Build(ctx context.Context, def *definition.Definition, secrets SecretSource, dest Destinations) (*ControllerHooks, error) {
	out := &ControllerHooks{}
	build := func(h *definition.Hook) (*Webhook, error) {
		if h == nil || h.Webhook == nil {
			return nil, nil
		}
		w, err := New(ctx, Config{
			Controller: def.Name, ControllerKind: def.Kind, Hook: h.Name, Webhook: h.Webhook, Resolved: h,
			EndpointConfigs: def.EndpointConfigs, Secrets: secrets, Destinations: dest,
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
	sync, err := build(def.Hooks.Sync)
	if err != nil {
		return fail(err)
	}
	finalize, err := build(def.Hooks.Finalize)
	if err != nil {
		return fail(err)
	}
	customize, err := build(def.Hooks.Customize)
	if err != nil {
		return fail(err)
	}
	out.set(def.Kind, sync, finalize, customize)
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

// set puts the webhooks where the engine takes the hooks of a controller
// of kind: a DecoratorController's sync and finalize hooks take a
// decorator's request. Interfaces are set only for hooks that exist: a nil
// *Webhook in an interface would not compare equal to nil.
func (h *ControllerHooks) set(kind string, sync, finalize, customize *Webhook) {
	if sync != nil {
		if kind == definition.KindDecorator {
			h.Decorator.Sync = sync
		} else {
			h.Sync = sync
		}
	}
	if finalize != nil {
		if kind == definition.KindDecorator {
			h.Decorator.Finalize = finalize
		} else {
			h.Finalize = finalize
		}
	}
	if customize != nil {
		h.Customize = customize
	}
}
