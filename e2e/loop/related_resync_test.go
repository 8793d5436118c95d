package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// relatedObjects is what the test hook reports in a parent's status: how
// many related objects its last sync request carried.
func relatedObjects(t *testing.T, ns, name string) int64 {
	t.Helper()
	n, _, _ := unstructured.NestedInt64(suite.GetHello(t, ns, name).Object, "status", "relatedObjects")
	return n
}

func relatedSecret(t *testing.T, ns, name, label string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"related-to": label}}}
	if _, err := suite.Kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRelatedRulesOfAV2CustomizeHookSpanNamespaces: with a v2 customize
// hook, Metacontroller's related-resource rules reach beyond the parent's
// namespace: a namespaceSelector picks the namespaces whose labels match, a
// labelSelector alone looks in every namespace; a new related object in a
// selected namespace resyncs the parent, one in another namespace does not
// reach it.
func TestRelatedRulesOfAV2CustomizeHookSpanNamespaces(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl = "related-v2"
	const label = "related-v2"
	teamA, teamB, other := suite.Namespace(t, "related-v2-a"), suite.Namespace(t, "related-v2-b"), suite.Namespace(t, "related-v2-other")
	for _, ns := range []string{teamA, teamB} {
		n, err := suite.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["team"] = label
		if _, err := suite.Kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Names differ across namespaces: the sync hook is v1, whose request
	// keys related objects by name alone.
	for _, ns := range []string{teamA, teamB, other} {
		relatedSecret(t, ns, "s1-"+ns, label)
	}
	framework.HelloController{Name: ctrl, HookURL: hook.URL,
		Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
			s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 0).WithVersion(v1alpha1.HookVersionV2))
		}}.Create(t, suite)
	parentNS := suite.Namespace(t, "related-v2-parents")
	secrets := func(extra map[string]interface{}) map[string]interface{} {
		rule := map[string]interface{}{"apiVersion": "v1", "resource": "secrets",
			"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"related-to": label}}}
		for k, v := range extra {
			rule[k] = v
		}
		s := framework.HelloSpec("blue", "a")
		s["related"] = rule
		return s
	}
	suite.CreateHello(t, parentNS, "by-namespace", ctrl, secrets(map[string]interface{}{
		"namespaceSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"team": label}}}))
	suite.CreateHello(t, parentNS, "everywhere", ctrl, secrets(nil))

	suite.Eventually(t, "the namespaceSelector rule to see the Secrets of the two team namespaces", func() (bool, error) {
		return unless(relatedObjects(t, parentNS, "by-namespace") == 2, fmt.Errorf("relatedObjects %d", relatedObjects(t, parentNS, "by-namespace")))
	})
	suite.Eventually(t, "the labelSelector-only rule to see the Secrets of every namespace", func() (bool, error) {
		return unless(relatedObjects(t, parentNS, "everywhere") == 3, fmt.Errorf("relatedObjects %d", relatedObjects(t, parentNS, "everywhere")))
	})

	// A new Secret outside the team namespaces reaches the parent that
	// looks everywhere, and, once it has, the other parent still counts
	// two; then a new one in a team namespace reaches both.
	relatedSecret(t, other, "s2-"+other, label)
	suite.Eventually(t, "the new Secret of the other namespace to reach the parent that looks everywhere", func() (bool, error) {
		return relatedObjects(t, parentNS, "everywhere") == 4, nil
	})
	if n := relatedObjects(t, parentNS, "by-namespace"); n != 2 {
		t.Fatalf("the namespaceSelector rule sees %d Secrets after one was added outside its namespaces, want 2", n)
	}
	relatedSecret(t, teamB, "s2-"+teamB, label)
	suite.Eventually(t, "the new Secret of a team namespace to reach both parents", func() (bool, error) {
		return relatedObjects(t, parentNS, "by-namespace") == 3 && relatedObjects(t, parentNS, "everywhere") == 5, nil
	})
}

// TestGlobalResyncPeriodResyncsUnchangedParents: with --resync-period, the
// loop syncs every parent again on that period although nothing changed,
// as Metacontroller's --cache-flush-interval does (its controllers' own
// resyncPeriodSeconds unset).
func TestGlobalResyncPeriodResyncsUnchangedParents(t *testing.T) {
	// Sequential: restarts the server (restartWith) with a resync period for every controller.
	hook := suite.HelloHook(t)
	suite.RestartWith(t, "--resync-period=2s")
	const ctrl = "global-resync"
	ns := suite.Namespace(t, "global-resync")
	framework.HelloController{Name: ctrl, HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", ctrl, framework.HelloSpec("blue", "a"))
	suite.WaitObserved(t, ns, "p", 1)
	calls := func() int {
		c, err := hook.Calls()
		if err != nil {
			t.Fatal(err)
		}
		return c["/sync "+ns+"/p"]
	}
	// Let the echoes of the first syncs' writes (children, status) pass:
	// two more calls, then the parent as it stays.
	settled := calls() + 2
	suite.Eventually(t, "the parent to settle", func() (bool, error) { return calls() >= settled, nil })
	converged := suite.GetHello(t, ns, "p")
	before := calls()
	// Three more calls with nothing changed: only the period brings them.
	suite.Eventually(t, "three resyncs of the unchanged parent", func() (bool, error) {
		return calls() >= before+3, nil
	})
	now := suite.GetHello(t, ns, "p")
	if now.GetResourceVersion() != converged.GetResourceVersion() {
		t.Fatalf("the parent changed (resourceVersion %s -> %s): the resyncs must not have been caused by a change", converged.GetResourceVersion(), now.GetResourceVersion())
	}
}

// TestRelatedResourceTheServerCannotListHoldsNoWorker: a customize hook
// asks for a resource the server may not list (Roles). More parents ask for
// it than the controller has workers, yet a parent without related rules,
// created after them, converges; each of the others gets a SyncError Event
// saying why, the controller's status too, and once the server is granted
// the right, they sync, with no restart.
func TestRelatedResourceTheServerCannotListHoldsNoWorker(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl = "related-forbidden"
	ns := suite.Namespace(t, "related-forbidden")
	framework.HelloController{Name: ctrl, HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithWorkers(2)
		s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 0))
	}}.Create(t, suite)
	roles := map[string]interface{}{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "roles",
		"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"related-to": ctrl}}}
	blocked := []string{"blocked-1", "blocked-2", "blocked-3"}
	for _, name := range blocked {
		s := framework.HelloSpec("blue", "a")
		s["related"] = roles
		suite.CreateHello(t, ns, name, ctrl, s)
	}
	suite.CreateHello(t, ns, "free", ctrl, framework.HelloSpec("green", "a"))
	suite.WaitObserved(t, ns, "free", 1)
	for _, name := range blocked {
		suite.WaitForEvent(t, ns, name, "SyncError", "roles.rbac.authorization.k8s.io", time.Minute)
	}
	suite.Eventually(t, "the controller's status to say why", func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return unless(strings.Contains(got.Status.LastSyncError, "roles.rbac.authorization.k8s.io") && strings.Contains(got.Status.LastSyncError, "forbidden"),
			fmt.Errorf("lastSyncError %q", got.Status.LastSyncError))
	})

	suite.MustApply(t, serverRights("related-roles", "rbac.authorization.k8s.io", []string{"roles"}, "list", "watch"))
	t.Cleanup(func() {
		_ = suite.Kube.RbacV1().ClusterRoles().Delete(context.Background(), "composite-apiserver-related-roles", metav1.DeleteOptions{})
	})
	for _, name := range blocked {
		suite.WaitObserved(t, ns, name, 1)
	}
}
