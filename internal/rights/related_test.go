package rights

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// oneSecret is a lister that has one object of every resource.
type oneSecret struct{}

func (oneSecret) List(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return []*unstructured.Unstructured{{Object: map[string]interface{}{"kind": "Secret"}}}, nil
}

func (oneSecret) Namespaces(context.Context, labels.Selector) ([]string, error) {
	return []string{"a"}, nil
}

// A related list that one of the controller's readers may not make is an
// error naming who lacks which right, never an empty list: a hook
// answering an empty world would have its children deleted.
func TestARefusedRelatedListIsAnErrorNotAnEmptyList(t *testing.T) {
	bob := Subject{User: &user.DefaultInfo{Name: "bob"}}
	identity := ServiceAccountSubject(v1alpha1.ServiceAccountReference{Namespace: "ops", Name: "default-id"})
	// Only the identity may list secrets; everyone may list namespaces.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetResource() == "namespaces" || a.GetUser().GetName() == identity.User.GetName() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	})
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, tc := range []struct {
		name     string
		subjects []Subject
		refused  string
	}{
		{"the identity alone may", []Subject{identity}, ""},
		{"the author may not", []Subject{bob}, `the controller's author "bob" may not list secrets in namespace a`},
		{"the identity may, its author may not", []Subject{identity, bob}, `the controller's author "bob" may not list secrets in namespace a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &RelatedLister{ObjectLister: oneSecret{}, Access: Access{Authorizer: authz}, Subjects: tc.subjects}
			objs, err := l.List(context.Background(), secrets, "a", labels.Everything())
			var forbidden *ForbiddenError
			switch {
			case tc.refused == "" && (err != nil || len(objs) != 1):
				t.Errorf("List = %d objects, %v; want the one", len(objs), err)
			case tc.refused != "" && (!errors.As(err, &forbidden) || objs != nil):
				t.Errorf("List = %d objects, %v; want a *ForbiddenError and nothing", len(objs), err)
			case tc.refused != "" && err.Error() != tc.refused+": no RBAC rule":
				t.Errorf("refusal %q, want %q", err, tc.refused)
			}
			if _, err := l.Namespaces(context.Background(), labels.Everything()); err != nil {
				t.Errorf("Namespaces: %v", err)
			}
		})
	}
}
