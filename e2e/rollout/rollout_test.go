package rollout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

const rolloutParents = 60

// rolloutController is a CompositeController of the hellos labelled
// test=<name>, whose sync hook is revision's of hook, landing changes in
// three steps: the parents labelled wave=1, those labelled wave=2, then
// every parent.
func rolloutController(name, hookURL, revision string) string {
	return rolloutControllerWith(name, hookURL, revision, threeWaves)
}

// threeWaves are rolloutController's steps.
const threeWaves = `    - selector: {matchLabels: {wave: "1"}}
    - selector: {matchLabels: {wave: "2"}}
    - percent: 100
    health:
      deadlineSeconds: 20
`

// startRollout starts a revision hook and, in namespace ns, the controller
// name at its revision v1 with rollout's steps (rolloutControllerWith); the
// controller is deleted when t ends.
func startRollout(t *testing.T, name, ns, rollout string) *revisionHook {
	t.Helper()
	suite.SetUpHellos(t)
	hook := startRevisionHook(t)
	suite.MustCreateNamespace(t, ns)
	suite.ApplyController(t, name, rolloutControllerWith(name, hook.url, "v1", rollout))
	return hook
}

// rolloutControllerWith is rolloutController with rollout, the YAML under
// spec.rollout from its steps' items on (four-space indented).
func rolloutControllerWith(name, hookURL, revision, rollout string) string {
	return plainControllerOf(name, hookURL, revision) + `  rollout:
    steps:
` + rollout
}

// plainControllerOf is a CompositeController of the hellos labelled
// test=<name> with ConfigMap children, whose sync hook is revision's of
// the hook at hookURL, with no rollout. Its spec ends the YAML, so that
// fields appended to it (rolloutControllerWith) go there.
func plainControllerOf(name, hookURL, revision string) string {
	return framework.ControllerFixture{Name: name, HookURL: hookURL + "/" + revision, Timeout: "3s"}.Manifest()
}

// TestRolloutPausesAtTheStepOfBadParentsResumesAndUndoes lands a change of
// a controller's hook over 60 parents in three steps, the new hook failing
// for the three parents labelled bad in the second step: the rollout
// passes the first step, pauses at the second naming exactly the bad
// parents, and leaves every parent of the third on the old hook, through a
// restart of the server. Once the hook is fixed, kubectl composite rollout
// resume completes it; kubectl composite rollout undo brings every parent
// back to the old hook's children.
func TestRolloutPausesAtTheStepOfBadParentsResumesAndUndoes(t *testing.T) {
	// Sequential: restarts the server (restart).
	ctx := context.Background()
	const name, ns = "rollout-steps", "rollout-steps"
	hook := startRollout(t, name, ns, threeWaves)
	var parents, wave1, wave2, wave3, bad []string
	for i := 0; i < rolloutParents; i++ {
		p := fmt.Sprintf("p-%02d", i)
		wave := fmt.Sprint(1 + i/20)
		labels := map[string]string{"test": name, "wave": wave}
		if i == 25 || i == 30 || i == 35 {
			labels["bad"] = "true"
			bad = append(bad, ns+"/"+p)
		}
		suite.CreateHello(t, ns, p, "", map[string]interface{}{"greeting": "hello"}, framework.WithLabels(labels))
		parents = append(parents, p)
		switch wave {
		case "1":
			wave1 = append(wave1, p)
		case "2":
			wave2 = append(wave2, p)
		default:
			wave3 = append(wave3, p)
		}
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, 3*time.Minute)

	// A fleet preview of the change previews its first step: the parents
	// of wave 1, and no other.
	hook.broken.Store("v2")
	proposal := filepath.Join(t.TempDir(), "proposal.yaml")
	if err := os.WriteFile(proposal, []byte(rolloutController(name, hook.url, "v2")), 0o600); err != nil {
		t.Fatal(err)
	}
	preview := kubectlComposite(t, "preview", "--all-parents", "-f", proposal)
	if preview.code != 1 {
		t.Errorf("kubectl composite preview --all-parents of the change: exit %d, want 1 (it changes children)", preview.code)
	}
	for _, p := range parents {
		if shown := strings.Contains(preview.stdout, ns+"/"+p+" ") || strings.Contains(preview.stdout, " "+p+" "); shown != slices.Contains(wave1, p) {
			t.Errorf("the preview of the change shows %s: %v; want only the first step's parents", p, shown)
		}
	}

	// The new revision fails the bad parents: step 1 passes, step 2
	// pauses at its deadline, naming them.
	converged := map[string]map[string]int{}
	for _, p := range wave3 {
		converged[p] = hook.callsOf(ns + "/" + p)
	}
	changed := time.Now()
	suite.MustApply(t, rolloutController(name, hook.url, "v2"))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 3 passed", changed)
	controllerEvent(t, name, "RolloutPaused", "paused at step 2 of 3", changed)
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := got.Status.Rollout
	if st == nil || st.Phase != v1alpha1.RolloutPaused || st.Step != 1 || st.CurrentRevision != 1 || st.UpdateRevision != 2 {
		t.Fatalf("status.rollout = %+v, want paused at step index 1 rolling revision 2 over 1", st)
	}
	if !slices.Equal(st.FailingParents, bad) {
		t.Errorf("status.rollout.failingParents = %v, want exactly the bad parents %v", st.FailingParents, bad)
	}
	good2 := slices.DeleteFunc(slices.Clone(wave2), func(p string) bool { return slices.Contains(bad, ns+"/"+p) })
	want := func(p string) string {
		if slices.Contains(wave1, p) || slices.Contains(good2, p) {
			return "v2"
		}
		return "v1"
	}
	waitRevisions(t, ns, append(append(slices.Clone(wave1), good2...), wave3...), want, time.Minute)
	for _, p := range wave3 {
		calls := hook.callsOf(ns + "/" + p)
		if calls["v2"] != 0 {
			t.Errorf("%s, of the third step, was synced %d times by revision 2's hook while the rollout paused at the second", p, calls["v2"])
		}
		// The loop that ran revision 1 runs on for the parents not
		// moved: a rollout's start syncs none of them again.
		if calls["v1"] != converged[p]["v1"] {
			t.Errorf("%s, converged and not moved, was synced %d more times by revision 1's hook since the change", p, calls["v1"]-converged[p]["v1"])
		}
	}
	status := kubectlComposite(t, "rollout", "status", name, "--watch=false")
	if status.code != 1 || !strings.Contains(status.stdout, "paused at step 2 of 3") || !strings.Contains(status.stdout, bad[0]) {
		t.Errorf("kubectl composite rollout status of a paused rollout: exit %d, %q; want exit 1 naming the step and the failing parents", status.code, status.stdout)
	}
	if out, stderr, err := suite.Kubectl(ctx, "get", "compositecontroller", name, "-o", "wide"); err != nil || !strings.Contains(out, "Paused 2/3") {
		t.Errorf("kubectl get compositecontroller %s -o wide: %v %s\n%s; want its ROLLOUT column saying Paused 2/3", name, err, stderr, out)
	}
	history := kubectlComposite(t, "rollout", "history", name)
	if history.code != 0 || !strings.Contains(history.stdout, "1 ") || !strings.Contains(history.stdout, "2 ") {
		t.Errorf("kubectl composite rollout history: exit %d, %q; want revisions 1 and 2", history.code, history.stdout)
	}

	// A live /sync (here a dry run, by kubectl composite preview) of a
	// parent not yet moved calls the hook its revision runs.
	third := ns + "/" + wave3[0]
	v1Calls := hook.callsOf(third)["v1"]
	if r := kubectlComposite(t, "preview", name, "--parent", third); r.code > 1 {
		t.Fatalf("kubectl composite preview of %s: exit %d", third, r.code)
	}
	if calls := hook.callsOf(third); calls["v1"] != v1Calls+1 || calls["v2"] != 0 {
		t.Errorf("a preview of %s, not yet moved, called the hooks %v; want one more call of revision 1's and none of revision 2's", third, calls)
	}

	// A restart resumes the rollout where it was: paused at step 2, no
	// parent moving either way.
	before := map[string]map[string]int{}
	for _, p := range parents {
		before[p] = hook.callsOf(ns + "/" + p)
	}
	restart(t)
	suite.Within(t, "every parent synced again by the restarted server", 3*time.Minute, func() (bool, error) {
		for _, p := range parents {
			if sum(hook.callsOf(ns+"/"+p)) == sum(before[p]) {
				return false, fmt.Errorf("%s not synced since the restart", p)
			}
		}
		return true, nil
	})
	for _, p := range parents {
		after := hook.callsOf(ns + "/" + p)
		moved := want(p) == "v2" || slices.Contains(bad, ns+"/"+p)
		if stale := map[bool]string{true: "v1", false: "v2"}[moved]; after[stale] != before[p][stale] {
			t.Errorf("%s was synced by revision %s's hook after the restart: every parent has one revision", p, stale)
		}
	}
	if got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutPaused || st.Step != 1 {
		t.Fatalf("after a restart, status.rollout = %+v, want still paused at step index 1", st)
	}

	// Fixed, resumed: the rollout completes and every parent runs v2.
	hook.broken.Store("")
	if r := kubectlComposite(t, "rollout", "resume", name); r.code != 0 || !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("kubectl composite rollout resume: exit %d", r.code)
	}
	if r := kubectlComposite(t, "rollout", "status", name, "--timeout=4m"); r.code != 0 || !strings.Contains(r.stdout, "successfully rolled out") {
		t.Fatalf("kubectl composite rollout status after resume: exit %d, %q", r.code, r.stdout)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v2" }, time.Minute)

	// Undone: revision 1's spec comes back, and every parent with it.
	if r := kubectlComposite(t, "rollout", "undo", name); r.code != 0 || !strings.Contains(r.stdout, "rolled back") {
		t.Fatalf("kubectl composite rollout undo: exit %d", r.code)
	}
	if r := kubectlComposite(t, "rollout", "status", name, "--timeout=4m"); r.code != 0 {
		t.Fatalf("kubectl composite rollout status after undo: exit %d, %q", r.code, r.stdout)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, time.Minute)
	got, err = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if url := *got.Spec.Hooks.Sync.Webhook.URL; !strings.HasSuffix(url, "/v1/sync") || got.Status.Revision != 3 {
		t.Errorf("after undo: hook %s at revision %d, want revision 1's hook as revision 3", url, got.Status.Revision)
	}
}

// TestRolloutRollsBackWhenTheErrorBudgetIsSpent: the first step's parents
// take the new hook; the second moves every parent, and the new hook fails
// the bad ones more often than the error budget allows: every parent,
// those of the first step included, goes back to the old hook's children.
func TestRolloutRollsBackWhenTheErrorBudgetIsSpent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, ns = "rollout-rollback", "rollout-rollback"
	const rollout = `    - selector: {matchLabels: {wave: "1"}}
    - percent: 100
    errorBudget:
      maxSyncFailures: 4
    onFailure: Rollback
`
	hook := startRollout(t, name, ns, rollout)
	var parents, wave1 []string
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("p-%02d", i)
		labels := map[string]string{"test": name, "wave": "2"}
		switch {
		case i < 5:
			labels["wave"] = "1"
			wave1 = append(wave1, p)
		case i%2 == 0:
			labels["bad"] = "true"
		}
		suite.CreateHello(t, ns, p, "", map[string]interface{}{"greeting": "hello"}, framework.WithLabels(labels))
		parents = append(parents, p)
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, 2*time.Minute)

	hook.broken.Store("v2")
	changed := time.Now()
	suite.MustApply(t, rolloutControllerWith(name, hook.url, "v2", rollout))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 2 passed", changed)
	controllerEvent(t, name, "RolloutRolledBack", "rolled back to revision 1", changed)
	for _, p := range wave1 {
		if hook.callsOf(ns + "/" + p)["v2"] == 0 {
			t.Errorf("%s, of the first step, was never synced by revision 2's hook", p)
		}
	}
	waitRevisions(t, ns, parents, func(string) string { return "v1" }, 2*time.Minute)
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutRolledBack || st.Reason != "ErrorBudgetExceeded" {
		t.Errorf("status.rollout = %+v, want RolledBack for ErrorBudgetExceeded", st)
	}
	if r := kubectlComposite(t, "rollout", "status", name, "--watch=false"); r.code != 1 || !strings.Contains(r.stdout, "rolledback") {
		t.Errorf("kubectl composite rollout status of a rolled-back rollout: exit %d, %q", r.code, r.stdout)
	}
}

// TestPausedParentIsNotSynced annotates one parent paused: a change of its
// spec calls no hook, its status says Paused; once the annotation is gone,
// the next sync runs and the hook's status replaces the condition.
func TestPausedParentIsNotSynced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, ns = "rollout-paused-parent", "rollout-paused-parent"
	hook := startRollout(t, name, ns, threeWaves)
	suite.CreateHello(t, ns, "quiet", name, map[string]interface{}{"greeting": "hello"})
	suite.CreateHello(t, ns, "busy", name, map[string]interface{}{"greeting": "hello"})
	waitRevisions(t, ns, []string{"quiet", "busy"}, func(string) string { return "v1" }, 2*time.Minute)

	if _, stderr, err := suite.Kubectl(ctx, "-n", ns, "annotate", "hellos.example.com", "quiet", v1alpha1.ParentPausedAnnotation+"=true"); err != nil {
		t.Fatalf("kubectl annotate: %v: %s", err, stderr)
	}
	suite.Within(t, "a Paused condition on the paused parent's status", time.Minute, func() (bool, error) {
		return conditionOf(t, ns, "quiet", v1alpha1.ConditionPaused) == "True", nil
	})
	suite.Within(t, "the controller's status counting one paused parent", time.Minute, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.PausedParents == 1, err
	})
	calls := sum(hook.callsOf(ns + "/quiet"))
	for _, p := range []string{"quiet", "busy"} {
		patch := `{"spec":{"greeting":"changed"}}`
		if _, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Patch(ctx, p, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh signal that the loop went past the paused parent's change:
	// the other parent's change was synced after it.
	suite.Within(t, "the unpaused parent's change synced", time.Minute, func() (bool, error) {
		return observedGeneration(t, ns, "busy") == 2, nil
	})
	if n := sum(hook.callsOf(ns + "/quiet")); n != calls {
		t.Errorf("the paused parent's hook was called %d times after it was paused", n-calls)
	}
	if g := observedGeneration(t, ns, "quiet"); g == 2 {
		t.Errorf("the paused parent's status observed generation 2: it was synced")
	}
	// A live /sync does not run over the pause either; a preview runs.
	ref := v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: "quiet"}}}
	_, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, name, &ref, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), v1alpha1.ParentPausedAnnotation) {
		t.Errorf("a live /sync of the paused parent answered %v, want a 409 naming %s", err, v1alpha1.ParentPausedAnnotation)
	}
	if _, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, name, &ref, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a preview of the paused parent: %v", err)
	}
	if n := sum(hook.callsOf(ns + "/quiet")); n != calls+1 {
		t.Errorf("the paused parent's hook was called %d times by a refused live /sync and a preview, want once (the preview)", n-calls)
	}
	calls++
	if _, stderr, err := suite.Kubectl(ctx, "-n", ns, "annotate", "hellos.example.com", "quiet", v1alpha1.ParentPausedAnnotation+"-"); err != nil {
		t.Fatalf("kubectl annotate: %v: %s", err, stderr)
	}
	suite.Within(t, "the parent synced once unpaused, its Paused condition gone", time.Minute, func() (bool, error) {
		return sum(hook.callsOf(ns+"/quiet")) > calls && observedGeneration(t, ns, "quiet") == 2 && conditionOf(t, ns, "quiet", v1alpha1.ConditionPaused) == "", nil
	})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func observedGeneration(t *testing.T, ns, name string) int64 {
	t.Helper()
	u, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return g
}

func conditionOf(t *testing.T, ns, name, typ string) string {
	t.Helper()
	u, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]interface{}); ok && m["type"] == typ {
			return fmt.Sprint(m["status"])
		}
	}
	return ""
}
