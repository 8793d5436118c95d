package rights

import (
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
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

// What a controller's hooks are sent besides its parents and children is
// checked against every reader: its own identity alone, its author alone,
// or, with the server's default identity, that identity and its author,
// so that the default's rights are not pooled among all authors. A default
// controller whose author is unknown may run only when it reads nothing
// more.
func TestReadersOfAController(t *testing.T) {
	byDefault := &v1alpha1.ServiceAccountReference{Namespace: "ops", Name: "default-id"}
	own := &v1alpha1.ServiceAccountReference{Namespace: "team", Name: "runner"}
	bob := &v1alpha1.ControllerAuthor{Username: "bob"}
	customize := &definition.Hook{}
	for _, tc := range []struct {
		name      string
		policy    IdentityPolicy
		identity  *v1alpha1.ServiceAccountReference
		author    *v1alpha1.ControllerAuthor
		customize *definition.Hook
		want      []string
		err       error
	}{
		{"author mode", IdentityPolicy{}, nil, bob, customize, []string{"bob"}, nil},
		{"its own identity", IdentityPolicy{Default: byDefault}, own, bob, customize, []string{"system:serviceaccount:team:runner"}, nil},
		{"the default identity and its author", IdentityPolicy{Default: byDefault}, nil, bob, customize, []string{"system:serviceaccount:ops:default-id", "bob"}, nil},
		{"the default identity, no author, related objects", IdentityPolicy{Default: byDefault}, nil, nil, customize, nil, ErrAuthorUnknown},
		{"the default identity, no author, nothing more read", IdentityPolicy{Default: byDefault}, nil, nil, nil, []string{"system:serviceaccount:ops:default-id"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := &definition.Definition{ServiceAccount: tc.identity, Author: tc.author}
			def.Hooks.Customize = tc.customize
			readers, err := tc.policy.ReadersOf(def)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			var got []string
			for _, r := range readers {
				got = append(got, r.User.GetName())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("readers %q, want %q", got, tc.want)
			}
		})
	}
}
