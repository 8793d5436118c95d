package hooks

import (
	"context"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var _ hookapi.DecoratorHook = &Webhook{}

// Decorate calls a DecoratorController's sync or finalize hook.
func (w *Webhook) Decorate(ctx context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, error) {
	resp, _, err := w.DecorateSent(ctx, req)
	return resp, err
}

// DecorateSent is Decorate that also returns the request body it sent, as
// SyncSent does for a CompositeController's hooks.
func (w *Webhook) DecorateSent(ctx context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, []byte, error) {
	return callSent[hookapi.DecoratorHookResponse](ctx, w, req)
}
