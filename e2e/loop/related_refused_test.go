package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// relatedSpec is a parent's spec whose customize hook asks for the Secrets
// labelled related-to=label and whose sync hook makes one ConfigMap
// "<parent>-rel-<secret>" of each.
func relatedSpec(label string) map[string]interface{} {
	return map[string]interface{}{"configMapPerRelated": true,
		"related": map[string]interface{}{"apiVersion": "v1", "resource": "secrets",
			"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"related-to": label}}}}
}

// madeFromRelated tells which of the ConfigMaps <parent>-rel-<secret> of
// secrets are missing or not controlled by the parent ns/name; "" when
// none.
func madeFromRelated(t *testing.T, ns, name string, secrets ...string) string {
	t.Helper()
	parent := suite.GetHello(t, ns, name)
	have := suite.ConfigMaps(t, ns)
	var missing []string
	for _, s := range secrets {
		cm, ok := have[name+"-rel-"+s]
		if !ok || !framework.OwnedBy(&cm, parent) {
			missing = append(missing, name+"-rel-"+s)
		}
	}
	return strings.Join(missing, ", ")
}

// pokeUntil annotates the parent ns/name with kubectl every two seconds,
// each a fresh sync whatever its backoff, until done: a right granted or
// revoked a moment ago shows only once the delegating authorizer's cache
// of the last answer expires (seconds).
func pokeUntil(t *testing.T, what, ns, name string, done func() bool) {
	t.Helper()
	nudgeUntil(t, what, 2*time.Minute, done, func(ctx context.Context, i int) {
		_, stderr, err := suite.Kubectl(ctx, "annotate", "hellos.example.com", name, "-n", ns, "--overwrite", fmt.Sprintf("poke=%d", i))
		if err != nil {
			t.Logf("kubectl annotate: %v: %s", err, stderr)
		}
	})
}

// TestARefusedRelatedListTouchesNoChild: a hook that makes one child per
// related object answers an empty world with no children, so a related
// list the author may no longer make must stop the sync before the hook,
// not send it nothing. The author's RoleBinding to list Secrets goes (as a
// GitOps tool replacing it would do for a moment): a poke of the parent
// gets a RelatedForbidden Event naming the author and the right, the hook
// is not called, and the children made from the Secrets are still there;
// a preview and a live /sync by an administrator are refused the same way.
// Once the RoleBinding is back, the parent converges with no restart: the
// Secret added meanwhile gets its child.
func TestARefusedRelatedListTouchesNoChild(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, author = "related-refused", "related-refused"
	ns := suite.Namespace(t, "related-refused")
	suite.MustApply(t, serverRights("related-refused-secrets", "", []string{"secrets"}, "list", "watch"))
	readsSecrets := `rules:
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list"]
`
	authorSubject := "{apiGroup: rbac.authorization.k8s.io, kind: User, name: " + author + "}"
	suite.Grant(t, "related-refused-reads-secrets", ns, readsSecrets, authorSubject)
	relatedSecret(t, ns, "s1", ctrl)
	relatedSecret(t, ns, "s2", ctrl)
	authorWritesController(t, ctrl, author, framework.HelloController{Name: ctrl, HookURL: hook.URL,
		Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
			s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 3*time.Second))
		}})

	suite.CreateHello(t, ns, "p", ctrl, relatedSpec(ctrl))
	suite.Eventually(t, "a ConfigMap made from each related Secret", func() (bool, error) {
		if missing := madeFromRelated(t, ns, "p", "s1", "s2"); missing != "" {
			return false, fmt.Errorf("missing %s", missing)
		}
		return true, nil
	})

	refusal := fmt.Sprintf("the controller's author %q may not list secrets in namespace %s", author, ns)
	refusals := eventCount(t, ns, "p", "RelatedForbidden", refusal)
	if _, stderr, err := suite.Kubectl(ctx, "delete", "rolebinding", "related-refused-reads-secrets", "-n", ns); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	pokeUntil(t, "a fresh RelatedForbidden Event naming the author", ns, "p", func() bool {
		return eventCount(t, ns, "p", "RelatedForbidden", refusal) > refusals
	})
	if missing := madeFromRelated(t, ns, "p", "s1", "s2"); missing != "" {
		t.Errorf("children made from related objects went when the author lost the right to list them: %s missing; Events: %q", missing, events(t, ns, "p"))
	}
	suite.Eventually(t, "the controller's Authorized condition naming the author and the right", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionAuthorized)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, refusal), nil
	})

	// Refused again, the hook is not called: the fresh Event is the
	// signal that the sync ran.
	hookCalls := calls(t, hook, "/sync "+ns+"/p")
	refusals = eventCount(t, ns, "p", "RelatedForbidden", refusal)
	pokeUntil(t, "another RelatedForbidden Event", ns, "p", func() bool {
		return eventCount(t, ns, "p", "RelatedForbidden", refusal) > refusals
	})
	if n := calls(t, hook, "/sync "+ns+"/p"); n != hookCalls {
		t.Errorf("the sync hook was called %d times while its author may not list the related Secrets", n-hookCalls)
	}

	// An administrator, who may list Secrets, is refused as the loop is:
	// neither a preview nor a live sync calls the author's hook.
	for _, dryRun := range []bool{true, false} {
		answer, err := syncAsAdmin(ctx, ctrl, ns, "p", dryRun)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refusal) {
			t.Errorf("an administrator's /sync (dryRun %v): %v, plan %+v; want Forbidden: %s", dryRun, err, answer.Status.Plan, refusal)
		}
	}
	if n := calls(t, hook, "/sync "+ns+"/p"); n != hookCalls {
		t.Errorf("an administrator's /sync called the author's hook %d times", n-hookCalls)
	}
	if missing := madeFromRelated(t, ns, "p", "s1", "s2"); missing != "" {
		t.Errorf("children made from related objects went after an administrator's /sync: %s missing", missing)
	}

	relatedSecret(t, ns, "s3", ctrl)
	suite.Grant(t, "related-refused-reads-secrets", ns, readsSecrets, authorSubject)
	pokeUntil(t, "the parent to converge once its author may list Secrets again", ns, "p", func() bool {
		return madeFromRelated(t, ns, "p", "s1", "s2", "s3") == ""
	})
	suite.Eventually(t, "the controller's Authorized condition True again", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionAuthorized)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
}

// TestTheDefaultIdentityLendsNoAuthorItsReads: with
// --default-controller-service-account, one ServiceAccount is the
// identity of every controller that names none; what one operator grants
// it for one controller (list Secrets, for a secret replicator) must not
// reach another author's hook. Bob may run a controller of hellos but not
// read Secrets; his framework.HelloController, which names no identity, asks for Secrets
// through its customize hook: his hook gets none, the sync stops before
// it, and the Event names Bob.
func TestTheDefaultIdentityLendsNoAuthorItsReads(t *testing.T) {
	// Sequential: restarts the server (restartWith) with a default identity for every controller.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, author = "default-identity", "default-identity-bob"
	home := suite.Namespace(t, "default-identity-home")
	ns := suite.Namespace(t, "default-identity")
	if _, err := suite.Kube.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default-id"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	identity := "{kind: ServiceAccount, name: default-id, namespace: " + home + "}"
	// The default identity may run hellos and read every Secret.
	suite.Grant(t, "e2e-default-id", "", framework.HelloLoopRules+`- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list"]
`, identity)
	suite.Grant(t, "composite-apiserver-impersonate", home, `rules:
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["impersonate", "get"]
`, "{kind: ServiceAccount, name: composite-apiserver, namespace: composite-system}")
	suite.MustApply(t, serverRights("default-identity-secrets", "", []string{"secrets"}, "list", "watch"))
	suite.RestartWith(t, "--default-controller-service-account="+home+"/default-id")

	relatedSecret(t, ns, "s1", ctrl)
	authorWritesController(t, ctrl, author, framework.HelloController{Name: ctrl, HookURL: hook.URL,
		Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
			s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 3*time.Second))
		}})
	s := relatedSpec(ctrl)
	s["configMaps"] = []interface{}{"a"}
	suite.CreateHello(t, ns, "p", ctrl, s)
	suite.WaitForEvent(t, ns, "p", "RelatedForbidden", fmt.Sprintf("the controller's author %q may not list secrets in namespace %s", author, ns), time.Minute)
	if n := calls(t, hook, "/sync "+ns+"/p"); n != 0 {
		t.Errorf("Bob's hook was called %d times with Secrets only the default identity may list", n)
	}
	if _, ok := suite.ConfigMaps(t, ns)["p-rel-s1"]; ok {
		t.Errorf("Bob's hook made a child of a Secret only the default identity may list")
	}
}
