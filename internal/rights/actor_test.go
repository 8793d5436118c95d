package rights

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

// impersonator records whom it was asked to act as.
type impersonator struct{ as []string }

func (i *impersonator) As(namespace, name string) (*target.Clients, error) {
	i.as = append(i.as, namespace+"/"+name)
	return &target.Clients{}, nil
}

// onlyUser allows everything to the user named, nothing to anyone else.
func onlyUser(name string) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == name {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	})
}

// withCredentials is a definition whose hooks' credentials come from one
// Secret.
func withCredentials(author *v1alpha1.ControllerAuthor, sa *v1alpha1.ServiceAccountReference) *definition.Definition {
	return &definition.Definition{
		Name: "hello", Kind: definition.KindComposite, Author: author, ServiceAccount: sa,
		References: []definition.Reference{{Resource: "secrets", Namespace: "hooks", Name: "token"}},
	}
}

// One decision for the loop, /sync and the fleet preview: a controller
// acts as its ServiceAccount, through impersonating clients, or as the
// server checked against its author; each refusal is typed, so that each
// caller words it its own way.
func TestActorForAController(t *testing.T) {
	sa := &v1alpha1.ServiceAccountReference{Namespace: "team", Name: "runner"}
	alice := &v1alpha1.ControllerAuthor{Username: "alice"}
	missing := errors.New("ServiceAccount team/runner does not exist")
	for _, tc := range []struct {
		name      string
		def       *definition.Definition
		policy    IdentityPolicy
		allowed   string
		saMissing bool
		noImp     bool
		subject   string
		as        []string
		check     func(error) bool
	}{
		{name: "its author, allowed the credentials", def: withCredentials(alice, nil), allowed: "alice", subject: "alice"},
		{name: "its identity, through impersonation", def: withCredentials(alice, sa), subject: "system:serviceaccount:team:runner", as: []string{"team/runner"}},
		{name: "an author who may not read the credentials", def: withCredentials(alice, nil), allowed: "bob",
			check: func(err error) bool {
				var refs *ReferencesError
				var f *ForbiddenError
				return errors.As(err, &refs) && errors.As(err, &f) && f.Right.Name == "token"
			}},
		{name: "no author recorded", def: withCredentials(nil, nil),
			check: func(err error) bool {
				var unknown *UnknownSubjectError
				return errors.As(err, &unknown) && errors.Is(err, ErrAuthorUnknown)
			}},
		{name: "no identity where one is required", def: withCredentials(alice, nil), policy: IdentityPolicy{Required: true},
			check: func(err error) bool {
				var unknown *UnknownSubjectError
				return errors.As(err, &unknown) && errors.Is(err, ErrIdentityRequired)
			}},
		{name: "an identity that does not exist", def: withCredentials(alice, sa), saMissing: true,
			check: func(err error) bool { return errors.Is(err, missing) }},
		{name: "an identity on a server that can't impersonate", def: withCredentials(alice, sa), noImp: true,
			check: func(err error) bool { return err != nil && strings.Contains(err.Error(), "no way to impersonate") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imp := &impersonator{}
			actors := Actors{Policy: tc.policy, Impersonator: imp, Access: Access{Authorizer: onlyUser(tc.allowed)}}
			if tc.noImp {
				actors.Impersonator = nil
			}
			if tc.saMissing {
				actors.ServiceAccountExists = func(context.Context, v1alpha1.ServiceAccountReference) error { return missing }
			}
			act, err := actors.For(context.Background(), tc.def)
			if tc.check != nil {
				if act != nil || !tc.check(err) {
					t.Fatalf("actor %+v, error %v (%T): not the refusal wanted", act, err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := act.Subject.User.GetName(); got != tc.subject {
				t.Errorf("subject %q, want %q", got, tc.subject)
			}
			if (act.Clients != nil) != (len(tc.as) > 0) || strings.Join(imp.as, ",") != strings.Join(tc.as, ",") {
				t.Errorf("clients %v, impersonated %q; want %q", act.Clients, imp.as, tc.as)
			}
		})
	}
}

// The readers of a controller with the server's default identity are that
// identity and its author (ReadersOf), and its credentials are read as the
// identity, which RBAC judges: only the author is asked about them.
func TestActorWithTheDefaultIdentityChecksItsAuthor(t *testing.T) {
	policy := IdentityPolicy{Default: &v1alpha1.ServiceAccountReference{Namespace: "ops", Name: "default-id"}}
	actors := Actors{Policy: policy, Impersonator: &impersonator{}, Access: Access{Authorizer: onlyUser("alice")}}
	act, err := actors.For(context.Background(), withCredentials(&v1alpha1.ControllerAuthor{Username: "alice"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(act.Readers) != 2 || act.Readers[1].User.GetName() != "alice" || act.Clients == nil {
		t.Errorf("readers %v, clients %v; want the identity and alice, and the identity's clients", act.Readers, act.Clients)
	}
	_, err = actors.For(context.Background(), withCredentials(&v1alpha1.ControllerAuthor{Username: "bob"}, nil))
	var refs *ReferencesError
	if !errors.As(err, &refs) {
		t.Errorf("an author who may not read the credentials: %v, want a *ReferencesError", err)
	}
}

// A fleet preview acts as the controller's identity, or as its caller,
// who is then its only reader; without a user in the request, as nobody.
func TestActorForTheCallerOfAFleetPreview(t *testing.T) {
	imp := &impersonator{}
	actors := Actors{Impersonator: imp}
	caller := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "carol"})
	act, err := actors.ForCaller(caller, withCredentials(nil, nil))
	if err != nil || act.Subject.User.GetName() != "carol" || len(act.Readers) != 1 || act.Clients != nil {
		t.Errorf("caller: %+v, %v; want carol as the only reader, with the server's clients", act, err)
	}
	act, err = actors.ForCaller(caller, withCredentials(nil, &v1alpha1.ServiceAccountReference{Namespace: "team", Name: "runner"}))
	if err != nil || act.Subject.ServiceAccount == nil || act.Clients == nil || len(imp.as) != 1 {
		t.Errorf("identity: %+v, %v; want the ServiceAccount's clients", act, err)
	}
	var unknown *UnknownSubjectError
	if _, err := actors.ForCaller(context.Background(), withCredentials(nil, nil)); !errors.As(err, &unknown) {
		t.Errorf("no user: %v, want an *UnknownSubjectError", err)
	}
}

// Credentials are read as the identity when there is one, else as the
// server (hooks.SecretsAs).
func TestActorReadsSecretsAsItsIdentity(t *testing.T) {
	server := hooks.NoClusterSecretSource{}
	if got := hooks.SecretsAs((&Actor{}).Kube(), server); got != server {
		t.Errorf("without clients: %T, want the server's", got)
	}
	identity := fake.NewSimpleClientset()
	if got := hooks.SecretsAs((&Actor{Clients: &target.Clients{Kube: identity}}).Kube(), server); got == server {
		t.Error("with clients: the server's secrets, want the identity's")
	}
}
