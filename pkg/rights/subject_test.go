package rights

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
)

// With an identity, the server needs only what its shared informers read
// and its Events: every write is the ServiceAccount's.
func TestServerRightsOfAControllerWithAnIdentityAreItsReads(t *testing.T) {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	cc.Spec.ChildResources = []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}}
	def, err := definition.Compile(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ServerRights(def, false)), len(Needed(def)); got != want {
		t.Errorf("without an identity the server needs %d rights, want all %d", got, want)
	}
	for _, r := range ServerRights(def, true) {
		read := (r.Verb == "list" || r.Verb == "watch") && r.Subresource == ""
		if !read && r.Resource != "events" {
			t.Errorf("with an identity the server still needs %s", r)
		}
	}
}

// A controller's subject is its ServiceAccount, with the groups
// kube-apiserver gives one it impersonates; else its recorded author; a
// controller with neither, or without an identity where one is required,
// has none.
func TestSubjectOfAController(t *testing.T) {
	def := &definition.Definition{}
	if _, err := (IdentityPolicy{}).SubjectOf(def); err != ErrAuthorUnknown {
		t.Errorf("no author: %v, want ErrAuthorUnknown", err)
	}
	def.Author = &v1alpha1.ControllerAuthor{Username: "alice", Groups: []string{"team"}}
	s, err := (IdentityPolicy{}).SubjectOf(def)
	if err != nil || s.User.GetName() != "alice" || s.ServiceAccount != nil {
		t.Errorf("author: %+v, %v", s, err)
	}
	if _, err := (IdentityPolicy{Required: true}).SubjectOf(def); err != ErrIdentityRequired {
		t.Errorf("required: %v, want ErrIdentityRequired", err)
	}
	byDefault := &v1alpha1.ServiceAccountReference{Namespace: "ops", Name: "default-runner"}
	s, err = (IdentityPolicy{Required: true, Default: byDefault}).SubjectOf(def)
	if err != nil || s.User.GetName() != "system:serviceaccount:ops:default-runner" {
		t.Errorf("default: %+v, %v", s, err)
	}
	def.ServiceAccount = &v1alpha1.ServiceAccountReference{Namespace: "team", Name: "runner"}
	s, err = (IdentityPolicy{Default: byDefault}).SubjectOf(def)
	if err != nil || s.User.GetName() != "system:serviceaccount:team:runner" {
		t.Fatalf("own identity: %+v, %v", s, err)
	}
	groups := map[string]bool{}
	for _, g := range s.User.GetGroups() {
		groups[g] = true
	}
	if !groups["system:serviceaccounts"] || !groups["system:serviceaccounts:team"] || !groups["system:authenticated"] {
		t.Errorf("groups %v, want a ServiceAccount's", s.User.GetGroups())
	}
}
