package rights

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
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

// TestAuthorMustReadWhatTheHooksCredentialsComeFrom: every Secret and
// ConfigMap a controller's hooks, patch hooks and endpointConfigs name is
// read by the server and sent to a URL the author chose: the author must
// be allowed to get each, by namespace and name. And the parent: the loop
// lists, watches and patches every one (finalizer), and streams them to
// the hook.
func TestAuthorMustReadWhatTheHooksCredentialsComeFrom(t *testing.T) {
	cc := controller()
	url := "https://hook.example/sync"
	cc.Spec.Hooks = &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
		URL:           &url,
		Authorization: &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "kube-system", Name: "admin-token"}},
		CABundle:      &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "team-a", Name: "hook-ca"}},
	}}}
	cc.Spec.EndpointConfigs = []v1alpha1.EndpointConfig{{Host: "hook.example",
		BasicAuth: &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "team-a", Name: "basic"}}}}
	var got []string
	for _, r := range AuthorRights(definitiontest.Compile(t, cc)) {
		got = append(got, r.String())
	}
	for _, want := range []string{
		"get secrets kube-system/admin-token", "get configmaps team-a/hook-ca", "get secrets team-a/basic",
		"get things.example.com", "list things.example.com", "watch things.example.com", "patch things.example.com",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("author rights %q lack %q", got, want)
		}
	}

	// The check asks for the named object, in its namespace.
	ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "tenant"})
	// CheckAuthor asks all at once.
	var mu sync.Mutex
	asked := map[string]bool{}
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		mu.Lock()
		asked[a.GetVerb()+" "+a.GetResource()+" "+a.GetNamespace()+"/"+a.GetName()] = true
		mu.Unlock()
		if a.GetResource() == "secrets" && a.GetNamespace() == "kube-system" {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	err := (&Escalation{Authorizer: authz}).CheckAuthor(ctx, cc)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "get secrets kube-system/admin-token") {
		t.Fatalf("a tenant referencing kube-system's Secret: %v, want Forbidden naming it", err)
	}
	if !asked["get secrets kube-system/admin-token"] {
		t.Errorf("the Secret was not asked for by namespace and name: %v", asked)
	}
}

// A fleet preview asks the rights on namespaced parents and children in
// each namespace it previews, and the others (a cluster-scoped child, the
// Secret the hook's credentials come from) as a create of the controller.
func TestAuthorRightsByScopeAsksNamespacedRightsPerNamespace(t *testing.T) {
	cc := controller()
	cc.Spec.ChildResources = append(cc.Spec.ChildResources, v1alpha1.CompositeControllerChildResourceRule{
		ResourceRule: v1alpha1.ResourceRule{APIVersion: "rbac.authorization.k8s.io/v1", Resource: "clusterroles"},
	})
	url := "https://hook.example.com/sync"
	cc.Spec.Hooks = &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
		URL:           &url,
		Authorization: &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "team", Name: "hook-token", Key: "token"}},
	}}}
	def := definitiontest.Compile(t, cc)
	cluster, namespaced := AuthorRightsByScope(def)
	if len(cluster)+len(namespaced) != len(AuthorRights(def)) {
		t.Fatalf("%d + %d rights, want the %d author rights", len(cluster), len(namespaced), len(AuthorRights(def)))
	}
	for _, r := range namespaced {
		if r.Resource != "things" && r.Resource != "configmaps" && r.Resource != "deployments" {
			t.Errorf("%s is asked per namespace", r)
		}
	}
	var clusterWide []string
	for _, r := range cluster {
		clusterWide = append(clusterWide, r.String())
	}
	got := strings.Join(clusterWide, ", ")
	for _, want := range []string{"create clusterroles.rbac.authorization.k8s.io", "get secrets team/hook-token"} {
		if !strings.Contains(got, want) {
			t.Errorf("cluster-wide rights %q lack %q", got, want)
		}
	}
	for _, r := range InNamespace(namespaced, "team-a") {
		if r.Namespace != "team-a" {
			t.Errorf("%s is not asked in team-a", r)
		}
	}
}
