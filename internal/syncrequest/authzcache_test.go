package syncrequest

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The per-request cache answers a question once per asker: a fleet preview
// asks both its caller and the controller's subject, with the same
// attributes, and one's answer must never stand for the other's.
func TestRequestAuthorizerAnswersEachUserForThemselves(t *testing.T) {
	allowed := &user.DefaultInfo{Name: "a", UID: "1", Groups: []string{"team"}}
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		u := a.GetUser()
		if u.GetName() == allowed.Name && u.GetUID() == allowed.UID && len(u.GetGroups()) == 1 && u.GetGroups()[0] == "team" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "not " + allowed.Name, nil
	})
	for _, tc := range []struct {
		name string
		then user.Info
	}{
		{"another name", &user.DefaultInfo{Name: "b", UID: "1", Groups: []string{"team"}}},
		{"another UID (the same name, deleted and made again)", &user.DefaultInfo{Name: "a", UID: "2", Groups: []string{"team"}}},
		{"other groups", &user.DefaultInfo{Name: "a", UID: "1", Groups: []string{"others"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := NewRequestAuthorizer(authz)
			ask := func(u user.Info) authorizer.Decision {
				d, _, _ := cached.Authorize(context.Background(), authorizer.AttributesRecord{
					User: u, Verb: "list", Resource: "secrets", Namespace: "ns", ResourceRequest: true,
				})
				return d
			}
			if d := ask(allowed); d != authorizer.DecisionAllow {
				t.Fatalf("%s: %v, want allowed", allowed.Name, d)
			}
			if d := ask(tc.then); d == authorizer.DecisionAllow {
				t.Errorf("%+v was allowed with the answer cached for %+v", tc.then, allowed)
			}
		})
	}
}
