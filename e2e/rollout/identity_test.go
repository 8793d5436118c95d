package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestEachRevisionActsAsItsOwnServiceAccount: a change of a controller's
// hook and of the ServiceAccount it acts as (spec.serviceAccount), landed
// in two steps. The new revision acts as the new ServiceAccount, which may
// write nothing yet: the first step's parents are refused, naming it, and
// the rollout pauses naming them; the parents not moved still run the old
// revision as the old ServiceAccount, which may, and a change of one of
// them converges. Once the new ServiceAccount is granted its rights,
// resume completes the rollout.
func TestEachRevisionActsAsItsOwnServiceAccount(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	hook := startRevisionHook(t)
	ctx := context.Background()
	const name, ns = "rollout-identity", "rollout-identity"
	suite.MustCreateNamespace(t, ns)
	for _, sa := range []string{"writer-v1", "writer-v2"} {
		if _, err := suite.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	suite.Grant(t, "writer-v1", ns, framework.HelloLoopRules, "{kind: ServiceAccount, name: writer-v1, namespace: "+ns+"}")
	// What an operator grants the server where controllers may act as
	// ServiceAccounts (the chart's identity.serviceAccountNamespaces).
	suite.Grant(t, "composite-apiserver-impersonate", ns, `rules:
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["impersonate", "get"]
`, "{kind: ServiceAccount, name: composite-apiserver, namespace: composite-system}")

	controllerAs := func(revision, sa string) string {
		return rolloutControllerWith(name, hook.url, revision, `    - selector: {matchLabels: {wave: "1"}}
    - percent: 100
    health:
      deadlineSeconds: 20
  serviceAccount: {namespace: `+ns+`, name: `+sa+`}
`)
	}
	suite.ApplyController(t, name, controllerAs("v1", "writer-v1"))
	var parents, wave1 []string
	for i := 0; i < 8; i++ {
		p := fmt.Sprintf("p-%d", i)
		wave := "2"
		if i < 3 {
			wave = "1"
			wave1 = append(wave1, ns+"/"+p)
		}
		suite.CreateHello(t, ns, p, "", map[string]interface{}{"greeting": "hello"}, framework.WithLabels(map[string]string{"test": name, "wave": wave}))
		parents = append(parents, p)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, 2*time.Minute)

	changed := time.Now()
	suite.MustApply(t, controllerAs("v2", "writer-v2"))
	controllerEvent(t, name, "RolloutPaused", "paused at step 1 of 2", changed)
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutPaused || !slices.Equal(st.FailingParents, wave1) {
		t.Fatalf("status.rollout = %+v; want paused at the first step naming its parents %v", st, wave1)
	}
	suite.WaitForEvent(t, ns, wave1[0][len(ns)+1:], "Forbidden", "ServiceAccount "+ns+"/writer-v2", time.Minute)

	// A parent not moved still runs revision 1, as writer-v1: a change
	// of it is observed.
	stay := parents[len(parents)-1]
	bumped, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Patch(ctx, stay, "application/merge-patch+json", []byte(`{"spec":{"greeting":"still v1"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	suite.Within(t, stay+"'s change observed by revision 1's loop", time.Minute, func() (bool, error) {
		p, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, stay, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
		return observed == bumped.GetGeneration(), nil
	})
	if calls := hook.callsOf(ns + "/" + stay); calls["v2"] != 0 {
		t.Errorf("%s, not moved, met revision 2's hook %d times", stay, calls["v2"])
	}

	suite.Grant(t, "writer-v2", ns, framework.HelloLoopRules, "{kind: ServiceAccount, name: writer-v2, namespace: "+ns+"}")
	if r := kubectlComposite(t, "rollout", "resume", name); r.code != 0 {
		t.Fatalf("kubectl composite rollout resume: exit %d", r.code)
	}
	if r := kubectlComposite(t, "rollout", "status", name, "--timeout=4m"); r.code != 0 {
		t.Fatalf("kubectl composite rollout status after the grant and resume: exit %d, %q", r.code, r.stdout)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v2" }, time.Minute)
}

// grantIn binds rules, as a Role in ns, to subject (a YAML subject entry),
// until the test ends.
