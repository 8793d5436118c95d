package parentloop

import (
	"context"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// Identity works out whom a controller's loop acts as: the manager's
// identity checks.
type Identity interface {
	// ActorFor is whom the loop of def acts as; it refuses a controller
	// whose identity is missing or may not read its hooks' credentials.
	ActorFor(ctx context.Context, def *definition.Definition) (*rights.Actor, error)
	// ServiceAccountExists tells whether an identity still exists: a
	// *ForbiddenError when it does not.
	ServiceAccountExists(ctx context.Context, sa v1alpha1.ServiceAccountReference) error
}
