package syncrequest

import (
	"context"
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
	"github.com/composite-apiserver/composite-apiserver/pkg/target"
)

// actor is whom a sync acts as besides its caller: the controller's
// identity, or the server checked against the controller's author, as the
// loop does (pkg/controller).
type actor struct {
	subject rights.Subject
	// readers must all be allowed the related objects the hooks are sent
	// (rights.ReadersOf), besides the caller.
	readers []rights.Subject
	// clients write as the identity; nil for the server's own.
	clients *target.Clients
	// secrets is where the hooks' credentials are read.
	secrets hooks.SecretSource
}

// actorFor refuses, as Forbidden, a sync of a controller whose subject is
// unknown or may not read the Secrets and ConfigMaps its hooks' credentials
// come from; without a target cluster nothing is read and nobody checked.
func (r *Runner) actorFor(ctx context.Context, def *definition.Definition) (*actor, error) {
	if r.cluster == nil {
		return &actor{secrets: r.controllers.secrets}, nil
	}
	refuse := func(err error) error {
		return apierrors.NewForbidden(v1alpha1.Resource(strings.ToLower(def.Kind)+"s"), def.Name, err)
	}
	subject, err := r.Identity.SubjectOf(def)
	if err != nil {
		return nil, refuse(err)
	}
	readers, err := r.Identity.ReadersOf(def)
	if err != nil {
		return nil, refuse(err)
	}
	a := &actor{subject: subject, readers: readers, secrets: r.controllers.secrets}
	if sa := subject.ServiceAccount; sa != nil {
		if a, err = r.identityActor(*sa); err != nil {
			return nil, err
		}
		a.readers = readers
	}
	if err := (rights.Access{Authorizer: r.authorizer}).CheckReferences(ctx, def, readers); err != nil {
		return nil, refuse(err)
	}
	return a, nil
}

// fleetActor is whom a fleet preview of def acts as: the controller's
// identity, or the caller, who is checked as its author.
func (r *Runner) fleetActor(ctx context.Context, def *definition.Definition) (*actor, error) {
	if sa := r.Identity.Identity(def); sa != nil {
		return r.identityActor(*sa)
	}
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewForbidden(v1alpha1.Resource(strings.ToLower(def.Kind)+"s"), def.Name, errors.New("no user in the request"))
	}
	subject := rights.Subject{User: user}
	return &actor{subject: subject, readers: []rights.Subject{subject}, secrets: r.controllers.secrets}, nil
}

// identityActor acts as sa: its clients write, and its hooks' credentials
// are read, as sa.
func (r *Runner) identityActor(sa v1alpha1.ServiceAccountReference) (*actor, error) {
	clients, err := r.cluster.As(sa.Namespace, sa.Name)
	if err != nil {
		return nil, err
	}
	subject := rights.ServiceAccountSubject(sa)
	return &actor{subject: subject, readers: []rights.Subject{subject}, clients: clients, secrets: hooks.NewClusterSecretSource(clients.Kube)}, nil
}
