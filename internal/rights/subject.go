package rights

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// Subject is whom a controller's reads and writes are checked against: its
// ServiceAccount when it has an identity (spec.serviceAccount, or the
// server's default), otherwise the recorded author of its spec.
type Subject struct {
	User user.Info
	// ServiceAccount is the identity; nil when the subject is the author.
	ServiceAccount *v1alpha1.ServiceAccountReference
}

// ErrAuthorUnknown is a controller without identity whose author was never
// recorded (it was stored by a version that did not record authors): no
// check could pass for it, so it runs nothing.
var ErrAuthorUnknown = errors.New("who wrote this controller's spec is not known (it was stored before composite-apiserver recorded authors), so nothing its hooks would receive can be checked against their rights; write it again (for example `kubectl apply` of its manifest, or `kubectl annotate`) as a user allowed everything its loop does")

// ErrIdentityRequired is a controller without identity on a server that
// runs only controllers with one (--require-controller-service-account).
var ErrIdentityRequired = errors.New("this server runs only controllers that name a ServiceAccount to act as (--require-controller-service-account): set spec.serviceAccount")

// IdentityPolicy is what the operator says about controller identities.
type IdentityPolicy struct {
	// Default, when set, is the identity of every controller that names
	// none.
	Default *v1alpha1.ServiceAccountReference
	// Required refuses controllers without an identity (unless Default
	// gives them one).
	Required bool
}

// Identity is the ServiceAccount the controller of def acts as; nil for
// the server's own identity.
func (p IdentityPolicy) Identity(def *definition.Definition) *v1alpha1.ServiceAccountReference {
	if def.ServiceAccount != nil {
		return def.ServiceAccount
	}
	return p.Default
}

// SubjectOf is whom the reads and writes of def's controller are checked
// against.
func (p IdentityPolicy) SubjectOf(def *definition.Definition) (Subject, error) {
	if sa := p.Identity(def); sa != nil {
		return ServiceAccountSubject(*sa), nil
	}
	if p.Required {
		return Subject{}, ErrIdentityRequired
	}
	return authorOf(def)
}

// ReadersOf are the subjects that must all be allowed what def's hooks are
// sent besides its parents and children — related objects and the
// Secrets and ConfigMaps of its hooks' credentials: its subject and, when
// that is the server's default identity, its recorded author as well. The
// default is one ServiceAccount for every controller that names none, so
// its rights alone would be pooled: a right granted to it for one
// controller (list secrets, for a secret replicator) would reach every
// author's hook through a customize rule. Resolving the default in each
// parent's namespace instead (Flux's --default-service-account) would need
// that account in every namespace a parent is in, and stop every
// controller installed without one. A controller with the default identity
// whose author was never recorded has no readers (ErrAuthorUnknown) if its
// hooks are sent anything besides its parents and children; it runs as
// before otherwise.
func (p IdentityPolicy) ReadersOf(def *definition.Definition) ([]Subject, error) {
	subject, err := p.SubjectOf(def)
	if err != nil {
		return nil, err
	}
	if def.ServiceAccount != nil || subject.ServiceAccount == nil {
		return []Subject{subject}, nil
	}
	author, err := authorOf(def)
	switch {
	case err == nil:
		return []Subject{subject, author}, nil
	case len(def.References) == 0 && def.Hooks.Customize == nil:
		return []Subject{subject}, nil
	default:
		return nil, err
	}
}

// authorOf is the recorded author of def as a subject.
func authorOf(def *definition.Definition) (Subject, error) {
	author, ok := AuthorSubject(def.Author)
	if !ok {
		return Subject{}, ErrAuthorUnknown
	}
	return author, nil
}

// AuthorSubject is the recorded author a as a subject, with the groups and
// extra their request had when they last wrote the controller (an identity
// provider's groups can't be asked again); false when no author is
// recorded.
func AuthorSubject(a *v1alpha1.ControllerAuthor) (Subject, bool) {
	if a == nil || a.Username == "" {
		return Subject{}, false
	}
	info := &user.DefaultInfo{Name: a.Username, UID: a.UID, Groups: a.Groups}
	if len(a.Extra) > 0 {
		info.Extra = make(map[string][]string, len(a.Extra))
		for k, v := range a.Extra {
			info.Extra[k] = v
		}
	}
	return Subject{User: info}, true
}

// ServiceAccountSubject is the subject of a controller acting as sa, with
// the groups kube-apiserver gives a ServiceAccount it impersonates.
func ServiceAccountSubject(sa v1alpha1.ServiceAccountReference) Subject {
	info := serviceaccount.UserInfo(sa.Namespace, sa.Name, "")
	groups := append(info.GetGroups(), user.AllAuthenticated)
	return Subject{User: &user.DefaultInfo{Name: info.GetName(), Groups: groups}, ServiceAccount: &sa}
}

// String names the subject as messages do.
func (s Subject) String() string {
	if s.ServiceAccount != nil {
		return fmt.Sprintf("ServiceAccount %s/%s", s.ServiceAccount.Namespace, s.ServiceAccount.Name)
	}
	if s.User == nil {
		return "nobody"
	}
	return fmt.Sprintf("the controller's author %q", s.User.GetName())
}

// Access asks whether a subject may do something, through the server's
// delegated authorizer: kube-apiserver's SubjectAccessReviews, whose
// answers it caches for seconds, so a sync that asks again costs nothing.
type Access struct {
	Authorizer authorizer.Authorizer
}

// ForbiddenError is a right a controller's subject lacks.
type ForbiddenError struct {
	Subject Subject
	Right   definition.Right
	Reason  string
}

func (e *ForbiddenError) Error() string {
	msg := fmt.Sprintf("%s may not %s", e.Subject, e.Right)
	switch {
	case e.Right.Name != "":
	case e.Right.Namespace != "":
		msg += " in namespace " + e.Right.Namespace
	default:
		msg += " in all namespaces"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Check answers nil when subject may do r, a *ForbiddenError when not.
func (a Access) Check(ctx context.Context, subject Subject, r definition.Right) error {
	if a.Authorizer == nil {
		return nil
	}
	decision, reason, err := a.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: subject.User, Verb: r.Verb, APIGroup: r.Group, Resource: r.Resource, Subresource: r.Subresource,
		Namespace: r.Namespace, Name: r.Name, ResourceRequest: true,
	})
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		return fmt.Errorf("can't check whether %s may %s: %w", subject, r, err)
	}
	return &ForbiddenError{Subject: subject, Right: r, Reason: reason}
}

// List is the right to list gvr in namespace ("" for all namespaces).
func List(gvr schema.GroupVersionResource, namespace string) definition.Right {
	return definition.Right{Verb: "list", Group: gvr.Group, Resource: gvr.Resource, Namespace: namespace}
}

// CheckReads refuses what subject may not list of what a sync reads for a
// parent in namespace and sends to the hook: the parent's resource and
// each child resource. The loop reads them from the server's informers,
// shared by every controller, and a /sync with its caller's rights; either
// way a controller with an identity must get only what it could list.
func (a Access) CheckReads(ctx context.Context, subject Subject, def *definition.Definition, namespace string) error {
	gvrs := append([]schema.GroupVersionResource{def.Parent.GVR}, def.ChildGVRs()...)
	for _, gvr := range gvrs {
		if err := a.Check(ctx, subject, List(gvr, namespace)); err != nil {
			return err
		}
	}
	return nil
}

// CheckReferences refuses the Secrets and ConfigMaps of def's hooks'
// credentials that one of readers (IdentityPolicy.ReadersOf) may not get.
// An identity reads them itself, through impersonation, and RBAC judges
// it there.
func (a Access) CheckReferences(ctx context.Context, def *definition.Definition, readers []Subject) error {
	for _, reader := range readers {
		if reader.ServiceAccount != nil {
			continue
		}
		for _, ref := range def.References {
			if err := a.Check(ctx, reader, ref.Right()); err != nil {
				return err
			}
		}
	}
	return nil
}
