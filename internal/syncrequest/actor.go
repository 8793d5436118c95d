package syncrequest

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// actors work out whom a sync or a fleet preview acts as besides its
// caller (rights.Actors, the loop's decision too).
func (r *Runner) actors() rights.Actors {
	a := rights.Actors{Policy: r.Identity, Access: rights.Access{Authorizer: r.authorizer}}
	if r.cluster != nil {
		a.Impersonator = r.cluster
	}
	return a
}

// actorFor is whom a sync of def acts as. Without a target cluster
// nothing is read and nobody checked: the server's own (absent) clients
// and secrets serve.
func (r *Runner) actorFor(ctx context.Context, def *definition.Definition) (*rights.Actor, error) {
	if r.cluster == nil {
		return &rights.Actor{}, nil
	}
	act, err := r.actors().For(ctx, def)
	return act, refusal(def, err)
}

// refusal answers, as Forbidden, a controller whose subject is unknown or
// may not read the Secrets and ConfigMaps its hooks' credentials come
// from; any other error (impersonation) as it is.
func refusal(def *definition.Definition, err error) error {
	var unknown *rights.UnknownSubjectError
	var references *rights.ReferencesError
	if errors.As(err, &unknown) || errors.As(err, &references) {
		return apierrors.NewForbidden(def.ControllerResource(), def.Name, err)
	}
	return err
}
