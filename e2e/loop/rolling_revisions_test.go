package loop

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// TestRolloutWhoseRevisionCantBeStoredClaimsNoProgress: when the new
// ControllerRevision of a rollout can't be stored (here a
// ValidatingAdmissionPolicy, which this server enforces on its own
// resources, refuses it), no child moves, the parent gets a SyncError, and
// its Updated condition does not claim a step that did not happen; once
// revisions may be stored again, the rollout goes on.
func TestRolloutWhoseRevisionCantBeStoredClaimsNoProgress(t *testing.T) {
	t.Parallel()
	hook := widgetHook(t)
	ctx := context.Background()
	const ctrl = "rolling-norevision"
	ns := suite.Namespace(t, ctrl)
	rollingController(t, ctrl, hook.URL, "RollingInPlace")
	names := []string{"a", "b"}
	parent := startRollout(t, ns, "p", ctrl, names)

	const message = "revisions are frozen by the test"
	unfreeze := refuse(t, ns, "metacontroller.k8s.io", "controllerrevisions", "CREATE", message)
	// The server enforces the policy once its informers have it.
	suite.Eventually(t, "the server to refuse a ControllerRevision", func() (bool, error) {
		rev := &v1alpha1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}, ParentPatch: runtime.RawExtension{Raw: []byte(`{}`)}}
		_, err := suite.Client.MetacontrollerV1alpha1().ControllerRevisions(ns).Create(ctx, rev, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), message), nil
	})

	suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"color": "red", "widgets": []interface{}{"a", "b"}})
	// Two failed syncs of the change (the Event counted twice): whatever
	// the first wrote, it has written.
	suite.Eventually(t, "two SyncErrors naming the refused revision", func() (bool, error) {
		list, err := suite.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p,reason=SyncError"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, message) && e.Count >= 2 {
				return true, nil
			}
		}
		return false, nil
	})
	if reason, msg := updated(t, ns, "p"); reason == engine.ReasonRolloutProgressing {
		t.Fatalf("Updated claims %s %q while no revision could be stored", reason, msg)
	}
	for n, w := range widgetsOf(t, ns, parent) {
		if w.Color != "blue" {
			t.Fatalf("Widget %s moved to %s without its revision", n, w.Color)
		}
	}

	unfreeze()
	driveRollout(t, ns, parent, names, "red")
}
