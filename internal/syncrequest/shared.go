package syncrequest

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// What the fleet preview (internal/fleetpreview) shares with /sync: the
// target cluster and the server's authorizer, the stored controllers
// compiled with their hooks (built once for both), whom a preview acts as,
// and the environment of a dry-run sync, so that a parent's preview in a
// fleet is the very dry run its /sync would be.

// Cluster is the target cluster; nil when the server runs standalone.
func (r *Runner) Cluster() *target.Cluster { return r.cluster }

// Authorizer checks the caller's rights; nil on an insecure test server.
func (r *Runner) Authorizer() authorizer.Authorizer { return r.authorizer }

// ChildCaches are the loop's caches of child resources on this replica;
// nil for none.
func (r *Runner) ChildCaches() ChildCaches { return r.caches }

// StoredHooks are the hooks of the stored controller, compiled as def:
// built once, with their credentials read from secrets, and kept for /sync
// and every preview of the controller.
func (r *Runner) StoredHooks(ctx context.Context, controller runtime.Object, def *definition.Definition, secrets hooks.SecretSource) (*hooks.ControllerHooks, error) {
	_, built, err := r.controllers.getCompiled(ctx, controller, func() (*definition.Definition, error) { return def, nil },
		func(*definition.Definition) (hooks.SecretSource, error) { return secrets, nil })
	return built, err
}

// ProposedHooks are the hooks of a proposed spec compiled as def, built
// for one request: the caller closes them.
func (r *Runner) ProposedHooks(ctx context.Context, def *definition.Definition, secrets hooks.SecretSource) (*hooks.ControllerHooks, error) {
	return hooks.Build(ctx, def, secrets, r.controllers.dest)
}

// HookSecrets is where the hooks' credentials are read for act.
func (r *Runner) HookSecrets(act *rights.Actor) hooks.SecretSource {
	return hooks.SecretsAs(act.Kube(), r.controllers.secrets)
}

// CallerActor is whom a preview of def by its caller acts as: the
// controller's identity, or the caller, who is checked as its author.
func (r *Runner) CallerActor(ctx context.Context, def *definition.Definition) (*rights.Actor, error) {
	act, err := r.actors().ForCaller(ctx, def)
	return act, refusal(def, err)
}

// DryRunEnv is the environment of a dry-run sync on the target cluster
// acting as act, with what it reads checked by authz.
func (r *Runner) DryRunEnv(authz authorizer.Authorizer, act *rights.Actor) reconcile.Env {
	env, _, _ := r.env(definition.RESTMapperResolver(r.cluster.Discovery), authz, false, act)
	return env
}
