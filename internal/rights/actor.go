package rights

import (
	"context"
	"errors"
	"fmt"

	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// Impersonator gives clients that act as a ServiceAccount
// (target.Cluster).
type Impersonator interface {
	As(namespace, name string) (*target.Clients, error)
}

// Actor is whom a controller's loop, a /sync or a fleet preview acts as
// and is checked against: the controller's ServiceAccount, through
// impersonating clients, or the server with the rights of the controller's
// recorded author (or, in a fleet preview, of the caller).
type Actor struct {
	Subject Subject
	// Readers must all be allowed the related objects the hooks are sent
	// (IdentityPolicy.ReadersOf).
	Readers []Subject
	// Clients write (and read credentials) as the identity; nil when the
	// controller has none and the server's own clients serve.
	Clients *target.Clients
}

// Kube is the client the hooks' credentials are read with as the
// identity (hooks.SecretsAs); nil when the controller has none and the
// server reads them.
func (a *Actor) Kube() kubernetes.Interface {
	if a.Clients == nil {
		return nil
	}
	return a.Clients.Kube
}

// UnknownSubjectError is a controller whose subject or readers can't be
// worked out (ErrAuthorUnknown, ErrIdentityRequired, a request without a
// user): nothing can be checked for it, so it runs nothing until someone
// writes it (or calls with a user).
type UnknownSubjectError struct{ Err error }

func (e *UnknownSubjectError) Error() string { return e.Err.Error() }
func (e *UnknownSubjectError) Unwrap() error { return e.Err }

// ReferencesError is a controller one of whose readers may not get (or
// could not be asked whether they may get) a Secret or ConfigMap its
// hooks' credentials come from: a *ForbiddenError, or the authorizer's
// failure.
type ReferencesError struct{ Err error }

func (e *ReferencesError) Error() string { return e.Err.Error() }
func (e *ReferencesError) Unwrap() error { return e.Err }

// Actors works out a controller's Actor: one decision for the loop, /sync
// and the fleet preview, each of which only words the refusals its own way
// (errors.As on *UnknownSubjectError, *ReferencesError).
type Actors struct {
	Policy IdentityPolicy
	// Impersonator makes the clients of an identity; nil when the server
	// has no way to impersonate.
	Impersonator Impersonator
	Access       Access
	// ServiceAccountExists, when set, refuses an identity that does not
	// exist, with the error it returns: impersonating a deleted
	// ServiceAccount still works wherever a RoleBinding names it.
	ServiceAccountExists func(ctx context.Context, sa v1alpha1.ServiceAccountReference) error
}

// For is whom def's controller acts as. It refuses one whose subject is
// unknown (*UnknownSubjectError) or whose readers may not read the Secrets
// and ConfigMaps its hooks' credentials come from (*ReferencesError): a
// credential is never read for a controller whose checks it did not pass.
func (a Actors) For(ctx context.Context, def *definition.Definition) (*Actor, error) {
	subject, err := a.Policy.SubjectOf(def)
	if err != nil {
		return nil, &UnknownSubjectError{Err: err}
	}
	readers, err := a.Policy.ReadersOf(def)
	if err != nil {
		return nil, &UnknownSubjectError{Err: err}
	}
	act := &Actor{Subject: subject, Readers: readers}
	if sa := subject.ServiceAccount; sa != nil {
		if act.Clients, err = a.impersonate(ctx, *sa); err != nil {
			return nil, err
		}
	}
	if err := a.Access.CheckReferences(ctx, def, readers); err != nil {
		return nil, &ReferencesError{Err: err}
	}
	return act, nil
}

// ForCaller is whom a fleet preview of def acts as: the controller's
// identity, or the request's user, who is checked as its author by the
// preview and is the only reader of what the hooks are sent.
func (a Actors) ForCaller(ctx context.Context, def *definition.Definition) (*Actor, error) {
	if sa := a.Policy.Identity(def); sa != nil {
		subject := ServiceAccountSubject(*sa)
		clients, err := a.impersonate(ctx, *sa)
		if err != nil {
			return nil, err
		}
		return &Actor{Subject: subject, Readers: []Subject{subject}, Clients: clients}, nil
	}
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, &UnknownSubjectError{Err: errors.New("no user in the request")}
	}
	subject := Subject{User: user}
	return &Actor{Subject: subject, Readers: []Subject{subject}}, nil
}

// impersonate returns clients that act as sa, once ServiceAccountExists
// (when set) found it.
func (a Actors) impersonate(ctx context.Context, sa v1alpha1.ServiceAccountReference) (*target.Clients, error) {
	if a.Impersonator == nil {
		return nil, fmt.Errorf("can't act as %s: the server has no way to impersonate", ServiceAccountSubject(sa))
	}
	if a.ServiceAccountExists != nil {
		if err := a.ServiceAccountExists(ctx, sa); err != nil {
			return nil, err
		}
	}
	return a.Impersonator.As(sa.Namespace, sa.Name)
}
