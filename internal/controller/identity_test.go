package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// A controller runs only while its recorded author may still do what
// writing it required: a refusal names the author, with the groups
// recorded at their last write, and each right they lack (T4).
func TestAControllerWhoseAuthorLostARightIsForbidden(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	cc.Spec.ChildResources = []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}}
	def, err := definition.Compile(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// alice may do everything but list hellos, unless the group she was
	// in when she wrote the controller may.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		for _, g := range a.GetUser().GetGroups() {
			if g == "platform" {
				return authorizer.DecisionAllow, "", nil
			}
		}
		if a.GetVerb() == "list" && a.GetResource() == "hellos" {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	m := &Manager{cfg: Config{Authorizer: authz}}
	cases := []struct {
		name   string
		author *v1alpha1.ControllerAuthor
		want   string
	}{
		{name: "an author who lost a right", author: &v1alpha1.ControllerAuthor{Username: "alice"},
			want: `the controller's author "alice" may not list hellos.example.com in all namespaces`},
		{name: "an author whose recorded group may", author: &v1alpha1.ControllerAuthor{Username: "alice", Groups: []string{"platform"}}},
		{name: "no recorded author: nothing to check here"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := *def
			d.Author = c.author
			err := m.checkAuthor(context.Background(), &d)
			var refused *parentloop.ForbiddenError
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && !errors.As(err, &refused):
				t.Errorf("err = %v, want a refusal that stops the controller with Forbidden", err)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("refusal %q does not say %q", err, c.want)
			}
		})
	}
}

// The periodic author re-check covers every revision a controller runs:
// during a rollout, the revision its parents not yet moved run, whose
// author may have been revoked while the rollout sat paused (R10).
func TestAuthorRecheckCoversTheRolloutsPreviousRevision(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	update, err := definition.Compile(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	previous := *update
	update.Author, previous.Author = &v1alpha1.ControllerAuthor{Username: "bob"}, &v1alpha1.ControllerAuthor{Username: "alice"}
	// alice's bindings were deleted; bob may do everything.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "alice" {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	m := &Manager{cfg: Config{Authorizer: authz}, recheck: map[string]bool{"hello": true}}
	r := &running{def: update, rollout: &rolloutRun{previousDef: &previous}}
	stop, err := m.authorRevoked(context.Background(), "hello", r.defs()...)
	if err != nil || !stop {
		t.Errorf("re-check during a rollout whose previous revision's author was revoked: stop %v, err %v; want a stop", stop, err)
	}
}
