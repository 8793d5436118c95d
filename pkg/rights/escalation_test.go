package rights

import (
	"context"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/pkg/definition/definitiontest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// denying allows everything but the listed "verb resource" pairs.
type denying map[string]bool

func (d denying) authorizer() authorizer.Authorizer { return authorizer.AuthorizerFunc(d.authorize) }

func (d denying) authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r := a.GetResource()
	if a.GetSubresource() != "" {
		r += "/" + a.GetSubresource()
	}
	if d[a.GetVerb()+" "+r] {
		return authorizer.DecisionNoOpinion, "denied", nil
	}
	return authorizer.DecisionAllow, "", nil
}

func TestAnAuthorMustMayDoWhatTheLoopWouldDo(t *testing.T) {
	ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "alice"})
	err := (&Escalation{Authorizer: denying{"create deployments": true, "update things/status": true}.authorizer()}).CheckAuthor(ctx, controller())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("err %v, want Forbidden", err)
	}
	for _, want := range []string{"create deployments.apps", "update things.example.com/status"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := (&Escalation{Authorizer: denying{}.authorizer()}).CheckAuthor(ctx, controller()); err != nil {
		t.Errorf("an author with every right was refused: %v", err)
	}
	if err := (&Escalation{Authorizer: denying{}.authorizer()}).CheckAuthor(context.Background(), controller()); !apierrors.IsForbidden(err) {
		t.Errorf("a request without a user: %v, want Forbidden", err)
	}
}

func TestServerRightsAreAskedOnceInTheirLifetime(t *testing.T) {
	client := allowing()
	c := &Checker{Kube: client}
	for i := 0; i < 3; i++ {
		if _, err := c.Missing(context.Background(), definitiontest.Compile(t, controller())); err != nil {
			t.Fatal(err)
		}
	}
	needed := Needed(definitiontest.Compile(t, controller()))
	if got := len(client.Actions()); got != len(needed) {
		t.Errorf("%d access reviews for 3 checks of %d rights: want each asked once while fresh", got, len(needed))
	}
}
