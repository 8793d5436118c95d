package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// decoratorController is a DecoratorController of the hellos labelled
// test=<name>, attaching a ConfigMap named after each, whose sync hook is
// revision's of the hook, landing changes in two steps: the objects
// labelled wave=1, then every object.
func decoratorController(name, hookURL, revision string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[1]s
spec:
  resources:
  - apiVersion: example.com/v1
    resource: hellos
    labelSelector:
      matchLabels: {test: %[1]s}
  attachments:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: %[2]s/%[3]s/sync
        timeout: 3s
  rollout:
    steps:
    - selector: {matchLabels: {wave: "1"}}
    - percent: 100
    health:
      deadlineSeconds: 60
`, name, hookURL, revision)
}

// TestDecoratorControllerRollsOutInSteps: a DecoratorController's change
// lands as a CompositeController's does, step by step, the objects of the
// first step first, every object's attachment following the new hook once
// the rollout is complete; kubectl composite rollout status and history
// name it as dec/NAME.
func TestDecoratorControllerRollsOutInSteps(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	hook := startRevisionHook(t)
	ctx := context.Background()
	const name, ns = "rollout-decorator", "rollout-decorator"
	suite.MustCreateNamespace(t, ns)
	suite.ApplyDecorator(t, name, decoratorController(name, hook.url, "v1"))
	var objects, wave2 []string
	for i := 0; i < 10; i++ {
		o := fmt.Sprintf("o-%d", i)
		wave := "1"
		if i >= 3 {
			wave = "2"
			wave2 = append(wave2, o)
		}
		suite.CreateHello(t, ns, o, "", map[string]interface{}{"greeting": "hello"}, framework.WithLabels(map[string]string{"test": name, "wave": wave}))
		objects = append(objects, o)
	}
	waitRevisions(t, ns, objects, func(string) string { return "v1" }, 2*time.Minute)

	changed := time.Now()
	suite.MustApply(t, decoratorController(name, hook.url, "v2"))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 2 passed", changed)
	controllerEvent(t, name, "RolloutComplete", "Rollout of revision 2 complete", changed)
	waitRevisions(t, ns, objects, func(string) string { return "v2" }, time.Minute)
	// The second step began once the first passed: no object of it met
	// the new hook before every object of the first had.
	var firstStepDone time.Time
	for _, o := range objects[:3] {
		if at := hook.firstCall(ns+"/"+o, "v2"); at.After(firstStepDone) {
			firstStepDone = at
		}
	}
	for _, o := range wave2 {
		if at := hook.firstCall(ns+"/"+o, "v2"); !at.After(firstStepDone) {
			t.Errorf("%s, of the second step, met revision 2's hook at %s, before the first step's objects all had (%s)", o, at.Format(time.StampMilli), firstStepDone.Format(time.StampMilli))
		}
	}
	got, err := suite.Client.MetacontrollerV1alpha1().DecoratorControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutComplete || st.UpdateRevision != 2 || got.Status.Revision != 2 || len(got.Status.History) != 1 {
		t.Errorf("status: revision %d, history %d, rollout %+v; want revision 2 complete over 1", got.Status.Revision, len(got.Status.History), st)
	}
	if r := kubectlComposite(t, "rollout", "status", "dec/"+name); r.code != 0 || !strings.Contains(r.stdout, "successfully rolled out") {
		t.Errorf("kubectl composite rollout status dec/%s: exit %d, %q", name, r.code, r.stdout)
	}
	if r := kubectlComposite(t, "rollout", "history", "dec/"+name, "--revision=1"); r.code != 0 || !strings.Contains(r.stdout, "/v1/sync") {
		t.Errorf("kubectl composite rollout history dec/%s --revision=1: exit %d, %q; want revision 1's spec", name, r.code, r.stdout)
	}
}
