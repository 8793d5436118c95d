package parentloop

import (
	"context"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/pkg/target"
)

// Identity works out whom a controller's loop acts as: the manager's
// identity checks.
type Identity interface {
	// ActorFor is whom the loop of def acts as; it refuses a controller
	// whose identity is missing or may not read its hooks' credentials.
	ActorFor(ctx context.Context, def *definition.Definition) (*Actor, error)
	// ServiceAccountExists tells whether an identity still exists: a
	// *ForbiddenError when it does not.
	ServiceAccountExists(ctx context.Context, sa v1alpha1.ServiceAccountReference) error
}

// Actor is whom one controller's loop acts as and is checked against: its
// ServiceAccount, through impersonating clients, or the server with the
// rights of the controller's recorded author.
type Actor struct {
	Subject rights.Subject
	// Readers must all be allowed the related objects its hooks are sent
	// (rights.ReadersOf).
	Readers []rights.Subject
	// Clients write (and read credentials) as the identity; nil when the
	// controller has none and the server's own clients serve.
	Clients *target.Clients
}

// secrets is where the hooks' credentials are read: as the identity when
// there is one.
func (a *Actor) secrets(server hooks.SecretSource) hooks.SecretSource {
	if a.Clients == nil {
		return server
	}
	return hooks.NewClusterSecretSource(a.Clients.Kube)
}
