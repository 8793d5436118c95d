package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// condition returns the CompositeController's condition of type typ, nil
// when it has none or can't be read (eventually polls on).
func condition(t *testing.T, name, typ string) *metav1.Condition {
	t.Helper()
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Logf("get CompositeController %s: %v", name, err)
		return nil
	}
	return meta.FindStatusCondition(got.Status.Conditions, typ)
}

// untilWithSpecBumps changes the parent's spec every two seconds until
// done: each change is a fresh sync, whatever the parent's backoff, and a
// grant made a moment ago shows only once the delegating authorizer's
// cache of the refusal expires (seconds).
func untilWithSpecBumps(t *testing.T, what, ns, name string, spec func(i int) map[string]interface{}, done func(parent *unstructured.Unstructured) bool) {
	t.Helper()
	nudgeUntil(t, what, 90*time.Second, func() bool { return done(suite.GetHello(t, ns, name)) }, func(_ context.Context, i int) {
		suite.SetHelloSpec(t, ns, name, spec(i))
	})
}

// TestRelatedObjectsReachTheHookOnlyWhereItsAuthorMayListThem: the loop
// lists related objects with the server's rights and sends them to the
// author's hook, so it sends only those the controller's recorded author
// may list. An author who may do everything the loop does, but not read
// Secrets, writes a controller whose customize hook asks for Secrets: the
// sync stops before its hook is called, the parent has an Event that says
// why and the controller's Authorized condition names the author. Once a
// RoleBinding lets the author list Secrets in the parent's namespace, the
// hook gets them, with no restart.
func TestRelatedObjectsReachTheHookOnlyWhereItsAuthorMayListThem(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, author = "related-author", "related-author"
	ns := suite.Namespace(t, "related-author")
	suite.MustApply(t, serverRights("related-author-secrets", "", []string{"secrets"}, "list", "watch"))
	authorWritesController(t, ctrl, author, framework.HelloController{Name: ctrl, HookURL: hook.URL,
		Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
			s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 0))
		}})
	relatedSecret(t, ns, "token", ctrl)

	spec := func(i int) map[string]interface{} {
		return map[string]interface{}{"configMaps": []interface{}{"a"}, "color": fmt.Sprint("c", i),
			"related": map[string]interface{}{"apiVersion": "v1", "resource": "secrets",
				"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"related-to": ctrl}}}}
	}
	suite.CreateHello(t, ns, "p", ctrl, spec(0))
	refusal := fmt.Sprintf("the controller's author %q may not list secrets in namespace %s", author, ns)
	suite.WaitForEvent(t, ns, "p", "RelatedForbidden", refusal, time.Minute)
	if n := calls(t, hook, "/sync "+ns+"/p"); n != 0 {
		t.Errorf("the sync hook was called %d times for a parent whose related Secrets its author may not list", n)
	}
	suite.Eventually(t, "the controller's Authorized condition naming the author", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionAuthorized)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, author) && strings.Contains(c.Message, "list secrets"), nil
	})

	// A preview by an administrator, who may list Secrets, does not call
	// the author's hook either, and says why.
	if _, err := syncAsAdmin(ctx, ctrl, ns, "p", true); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refusal) {
		t.Errorf("an administrator's preview: %v; want Forbidden: %s", err, refusal)
	}
	if n := calls(t, hook, "/sync "+ns+"/p"); n != 0 {
		t.Errorf("an administrator's preview called the author's hook with Secrets its author may not list")
	}

	suite.Grant(t, "related-author-reads-secrets", ns, `rules:
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list"]
`, "{apiGroup: rbac.authorization.k8s.io, kind: User, name: "+author+"}")
	untilWithSpecBumps(t, "the Secret to reach the hook once its author may list it", ns, "p", spec, func(p *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "relatedObjects")
		return n == 1
	})
}

// authorWritesController grants author, a user, every right the loop of a
// controller of hellos uses, and applies c as them: they are its recorded
// author.
func authorWritesController(t *testing.T, ctrl, author string, c framework.HelloController) {
	t.Helper()
	ctx := context.Background()
	suite.Grant(t, "e2e-"+author, "", framework.HelloLoopRules+`- apiGroups: ["metacontroller.k8s.io"]
  resources: ["compositecontrollers"]
  verbs: ["get", "list", "create", "update", "patch"]
`, "{apiGroup: rbac.authorization.k8s.io, kind: User, name: "+author+"}")
	kubeconfig, err := suite.UserKubeconfig(author)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cc.yaml")
	if err := os.WriteFile(file, []byte(c.Manifest()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = suite.Kubectl(ctx, "delete", "cc", ctrl, "--ignore-not-found") })
	if stderr, err := suite.ApplyAsOnceAllowed(ctx, kubeconfig, file); err != nil {
		t.Fatalf("the author was refused a controller they may run: %v\n%s", err, stderr)
	}
	suite.WaitRunning(t, ctrl)
	if got, _ := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl, metav1.GetOptions{}); got.Status.Author == nil || got.Status.Author.Username != author {
		t.Fatalf("status.author = %+v, want the user who wrote the spec, %s", got.Status.Author, author)
	}
}

// syncAsAdmin syncs the live parent ns/name with controller ctrl as an
// administrator, or previews it (dryRun).
func syncAsAdmin(ctx context.Context, ctrl, ns, name string, dryRun bool) (*v1alpha1.SyncRequest, error) {
	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":%q}}}`, ns, name)
	req := suite.Client.MetacontrollerV1alpha1().RESTClient().Post().Resource("compositecontrollers").Name(ctrl).SubResource("sync")
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	out := &v1alpha1.SyncRequest{}
	return out, req.Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx).Into(out)
}

// TestAControllerActsAsItsServiceAccount: a controller that names a
// ServiceAccount acts as it, so kube-apiserver's RBAC judges what its loop
// does. Its ServiceAccount may manage hellos, ConfigMaps and Services in
// one namespace only: a parent there converges; a parent in another
// namespace gets nothing (though the server itself has the rights there)
// and an Event naming the ServiceAccount; a RoleBinding there makes it
// converge with no restart. Once the ServiceAccount is deleted, the loop
// does nothing more for the controller and says so, and nothing is deleted.
func TestAControllerActsAsItsServiceAccount(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl = "identity"
	home, away := suite.Namespace(t, "identity-home"), suite.Namespace(t, "identity-away")
	if _, err := suite.Kube.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "writer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saSubject := "{kind: ServiceAccount, name: writer, namespace: " + home + "}"
	suite.Grant(t, "identity-writer", home, framework.HelloLoopRules, saSubject)
	// What an operator grants the server per namespace whose
	// ServiceAccounts controllers may act as (the chart's
	// identity.serviceAccountNamespaces).
	suite.Grant(t, "composite-apiserver-impersonate", home, `rules:
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["impersonate", "get"]
`, "{kind: ServiceAccount, name: composite-apiserver, namespace: composite-system}")

	framework.HelloController{Name: ctrl, HookURL: hook.URL,
		Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
			s.WithServiceAccount(acv1alpha1.ServiceAccountReference().WithNamespace(home).WithName("writer"))
		}}.Create(t, suite)

	spec := func(i int) map[string]interface{} {
		return map[string]interface{}{"configMaps": []interface{}{"a"}, "color": fmt.Sprint("c", i)}
	}
	suite.CreateHello(t, home, "p", ctrl, spec(0))
	suite.WaitObserved(t, home, "p", 1)

	suite.CreateHello(t, away, "p", ctrl, spec(0))
	sa := "ServiceAccount " + home + "/writer"
	suite.WaitForEvent(t, away, "p", "Forbidden", sa+" may not list hellos.example.com in namespace "+away, time.Minute)
	if got := suite.ConfigMaps(t, away); len(got) != 0 {
		t.Errorf("the loop wrote ConfigMaps where its ServiceAccount may not: %s", framework.Names(got))
	}
	suite.Eventually(t, "the controller's Authorized condition naming the ServiceAccount", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionAuthorized)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, sa), nil
	})

	// A live /sync by an administrator, who may write there, acts as the
	// ServiceAccount too, and is refused.
	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"p"}}}`, away)
	answer := &v1alpha1.SyncRequest{}
	err := suite.Client.MetacontrollerV1alpha1().RESTClient().Post().Resource("compositecontrollers").Name(ctrl).SubResource("sync").
		Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx).Into(answer)
	// Refused as a whole (the ServiceAccount may not list what the hook
	// would get), or item by item in the plan by kube-apiserver: either
	// way naming the ServiceAccount.
	said := fmt.Sprint(err)
	for _, item := range answer.Status.Plan {
		said += "\n" + item.Error
	}
	if !strings.Contains(said, sa) && !strings.Contains(said, "system:serviceaccount:"+home+":writer") {
		t.Errorf("an administrator's live sync did not act as the controller's ServiceAccount: %s", said)
	}
	if got := suite.ConfigMaps(t, away); len(got) != 0 {
		t.Errorf("a live sync wrote ConfigMaps where the controller's ServiceAccount may not: %s", framework.Names(got))
	}

	suite.Grant(t, "identity-writer", away, framework.HelloLoopRules, saSubject)
	untilWithSpecBumps(t, "the parent where the ServiceAccount was just granted rights to converge", away, "p", spec, func(p *unstructured.Unstructured) bool {
		observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
		return observed == p.GetGeneration() && suite.ChildrenAsAsked(p) == nil
	})

	// The ServiceAccount goes: its RoleBindings stay, and impersonating
	// it would still work, but the loop does nothing more as it.
	if err := suite.Kube.CoreV1().ServiceAccounts(home).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := suite.ConfigMaps(t, home)
	gone := sa + ", the controller's identity (spec.serviceAccount), does not exist"
	// The loop remembers for a few seconds that the ServiceAccount exists.
	untilWithSpecBumps(t, "a Forbidden Event saying the identity is gone", home, "p", spec, func(*unstructured.Unstructured) bool {
		return forbiddenCount(t, home, "p", gone) > 0
	})
	// From now on nothing is written as it: a change of the parent is
	// refused again (a fresh Event), and its ConfigMap keeps its data.
	seen := forbiddenCount(t, home, "p", gone)
	suite.SetHelloSpec(t, home, "p", map[string]interface{}{"configMaps": []interface{}{"a"}, "color": "after-the-identity"})
	suite.Eventually(t, "the change after the identity went to be refused", func() (bool, error) {
		return forbiddenCount(t, home, "p", gone) > seen, nil
	})
	after := suite.ConfigMaps(t, home)
	if framework.Names(after) != framework.Names(before) {
		t.Errorf("ConfigMaps changed once the identity was gone: %s, then %s", framework.Names(before), framework.Names(after))
	}
	for _, cm := range after {
		if cm.Data["color"] == "after-the-identity" {
			t.Errorf("ConfigMap %s was written as a deleted ServiceAccount", cm.Name)
		}
	}
}

// forbiddenCount is how many times a Forbidden Event whose message contains
// substring was recorded on the object ns/name.
func forbiddenCount(t *testing.T, ns, name, substring string) int32 {
	t.Helper()
	return eventCount(t, ns, name, "Forbidden", substring)
}

// eventCount is how many times an Event of reason whose message contains
// substring was recorded on the object ns/name.
func eventCount(t *testing.T, ns, name, reason, substring string) int32 {
	t.Helper()
	return countEvents(t, ns, "involvedObject.name="+name+",reason="+reason, substring)
}

// TestLockdownRunsNoControllerWithTheServersRights: with
// --require-controller-service-account, a controller that names no
// ServiceAccount is refused with a field error, one stored before stops
// with Ready=False IdentityRequired, and one that names a ServiceAccount
// its author may impersonate is accepted.
func TestLockdownRunsNoControllerWithTheServersRights(t *testing.T) {
	// Sequential: restarts the server (restartWith), which then refuses every controller without an identity.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	before := framework.HelloController{Name: "lockdown-before", HookURL: hook.URL}
	before.Create(t, suite)

	suite.RestartWith(t, "--require-controller-service-account")

	err := suite.Apply(ctx, framework.HelloController{Name: "lockdown-refused", HookURL: hook.URL}.Manifest())
	if err == nil || !strings.Contains(err.Error(), "spec.serviceAccount: Required value") {
		t.Errorf("a controller without identity was not refused: %v", err)
	}
	suite.Eventually(t, "the controller stored before to stop with IdentityRequired", func() (bool, error) {
		c := condition(t, before.Name, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "IdentityRequired", nil
	})
	withIdentity := framework.HelloController{Name: "lockdown-identity", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithServiceAccount(acv1alpha1.ServiceAccountReference().WithNamespace("default").WithName("default"))
	}}
	t.Cleanup(func() {
		_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), withIdentity.Name, metav1.DeleteOptions{})
	})
	if err := suite.Apply(ctx, withIdentity.Manifest()); err != nil {
		t.Errorf("a controller with an identity was refused: %v", err)
	}
}

// TestAControllerStoredBeforeAuthorsWereRecordedRunsNothingUntilWrittenAgain:
// a controller stored by a version that recorded no author (its stored
// status.author removed in etcd, as such a version left it) stops, Ready
// False with reason AuthorUnknown: nothing it would send a hook can be
// checked against anyone's rights. Once an administrator writes it again —
// an annotation is enough — they are its author and it runs again.
func TestAControllerStoredBeforeAuthorsWereRecordedRunsNothingUntilWrittenAgain(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl = "author-unknown"
	framework.HelloController{Name: ctrl, HookURL: hook.URL}.Create(t, suite)
	forgetAuthor(t, ctrl)
	suite.Eventually(t, "the controller without an author to stop with AuthorUnknown", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "AuthorUnknown", nil
	})

	if _, stderr, err := suite.Kubectl(ctx, "annotate", "cc", ctrl, "reviewed=yes"); err != nil {
		t.Fatalf("annotate: %v\n%s", err, stderr)
	}
	suite.Eventually(t, "the controller written again by an administrator to run", func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Author != nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady), nil
	})
}

// TestTheLoopReadsNoCredentialsItsAuthorMayNoLongerRead: a controller's
// hook credentials come from a Secret its author may read, so it is
// accepted and runs. Once the author may no longer read it, the loop
// (started again by a restart of the server) does not read it for them:
// the controller is Ready False, Forbidden, naming the author and the
// Secret.
func TestTheLoopReadsNoCredentialsItsAuthorMayNoLongerRead(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, author = "credentials-author", "credentials-author"
	ns := suite.Namespace(t, "credentials-author")
	suite.Grant(t, "e2e-credentials-author", "", framework.HelloLoopRules+`- apiGroups: ["metacontroller.k8s.io"]
  resources: ["compositecontrollers"]
  verbs: ["get", "list", "create", "update", "patch"]
`, "{apiGroup: rbac.authorization.k8s.io, kind: User, name: "+author+"}")
	suite.Grant(t, "reads-hook-token", ns, `rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["hook-token"]
  verbs: ["get"]
`, "{apiGroup: rbac.authorization.k8s.io, kind: User, name: "+author+"}")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-token", Namespace: ns}, StringData: map[string]string{"token": "s3cret"}}
	if _, err := suite.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := suite.UserKubeconfig(author)
	if err != nil {
		t.Fatal(err)
	}
	manifest := framework.HelloController{Name: ctrl, HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.Sync.Webhook.WithAuthorization(acv1alpha1.AuthorizationConfig().
			WithSecretRef(acv1alpha1.KeyReference().WithNamespace(ns).WithName("hook-token").WithKey("token")))
	}}.Manifest()
	file := filepath.Join(t.TempDir(), "cc.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = suite.Kubectl(ctx, "delete", "cc", ctrl, "--ignore-not-found") })
	if stderr, err := suite.ApplyAsOnceAllowed(ctx, kubeconfig, file); err != nil {
		t.Fatalf("the author was refused a controller whose credentials they may read: %s", stderr)
	}
	suite.WaitRunning(t, ctrl)

	if _, stderr, err := suite.Kubectl(ctx, "delete", "rolebinding", "reads-hook-token", "-n", ns); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	// The delegating authorizer may remember the grant for seconds: the
	// restart that starts the loop again comes after that.
	time.Sleep(11 * time.Second)
	suite.RestartWith(t)
	suite.Eventually(t, "the controller whose author may no longer read its credentials to stop", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Forbidden" &&
			strings.Contains(c.Message, fmt.Sprintf("the controller's author %q may not get secrets %s/hook-token", author, ns)), nil
	})
}
