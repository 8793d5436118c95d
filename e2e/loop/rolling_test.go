package loop

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// rollingChildren is the child resource of the rolling update tests,
// widgets.example.com with a status, which the tests write by hand as the
// widgets' own controller would (there is none), and the server's rights
// on it.
var rollingChildren = framework.CRD{Group: "example.com", Plural: "widgets", Kind: "Widget"}.Manifest() +
	serverRights("widgets", "example.com", []string{"widgets"}, "get", "list", "watch", "create", "update", "patch", "delete")

// widgetsErr is the install's error, kept for every test: parallel tests
// that call installWidgets while the first one installs wait for it, and
// must fail as it does.
var (
	widgetsOnce sync.Once
	widgetsErr  error
)

func installWidgets(t *testing.T) {
	t.Helper()
	widgetsOnce.Do(func() { widgetsErr = suite.Apply(context.Background(), rollingChildren) })
	if widgetsErr != nil {
		t.Fatal(widgetsErr)
	}
	suite.Eventually(t, "widgets served", func() (bool, error) {
		_, err := suite.Dynamic.Resource(widgets).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err == nil, err
	})
}

// rollingController declares Widget children with the update method,
// waiting for Ready=True.
func rollingController(t *testing.T, name, hookURL, method string) {
	t.Helper()
	manifest := framework.ControllerFixture{Name: name, HookURL: hookURL, Child: widgets, Method: method, ReadyChecks: true, Timeout: "3s"}.Manifest()
	suite.ApplyController(t, name, manifest)
	suite.WaitRunning(t, name)
}

// widgetHook is suite.HelloHook with Widgets served, for the controllers
// of Widget children.
func widgetHook(t *testing.T) *framework.PythonHook {
	t.Helper()
	hook := suite.HelloHook(t)
	installWidgets(t)
	return hook
}

// rollingSetUp is where a test of a rolling update starts: the namespace
// ctrl and the controller ctrl of Widget children updated by method, with
// a hook of the test's own; it returns the namespace.
func rollingSetUp(t *testing.T, ctrl, method string) (ns string) {
	t.Helper()
	hook := widgetHook(t)
	ns = suite.Namespace(t, ctrl)
	rollingController(t, ctrl, hook.URL, method)
	return ns
}

// widget is what a test sees of one Widget.
type widget struct {
	Color      string
	UID        string
	Generation int64
	// Healthy: its status has observed its generation and says Ready=True.
	Healthy bool
}

// widgetsOf are the Widgets the parent controls, by name; it fails on a
// Widget of the parent's name prefix that the parent does not control.
func widgetsOf(t *testing.T, ns string, parent *unstructured.Unstructured) map[string]widget {
	t.Helper()
	list, err := suite.Dynamic.Resource(widgets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]widget{}
	for _, w := range list.Items {
		if !strings.HasPrefix(w.GetName(), parent.GetName()+"-") {
			continue
		}
		if !framework.OwnedBy(&w, parent) || len(w.GetOwnerReferences()) != 1 {
			t.Fatalf("Widget %s has owners %v, want exactly the parent", w.GetName(), w.GetOwnerReferences())
		}
		color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
		og, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration")
		ready := engine.StatusCondition(&w, "Ready")["status"] == "True"
		out[strings.TrimPrefix(w.GetName(), parent.GetName()+"-")] = widget{
			Color: color, UID: string(w.GetUID()), Generation: w.GetGeneration(), Healthy: ready && og == w.GetGeneration(),
		}
	}
	return out
}

// setWidgetStatus writes a Widget's status as its controller would: it has
// observed the current generation, and Ready is ready.
func setWidgetStatus(t *testing.T, ns, name, ready string) {
	t.Helper()
	suite.Eventually(t, "status of Widget "+name, func() (bool, error) {
		w, err := suite.Dynamic.Resource(widgets).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		w.Object["status"] = map[string]interface{}{
			"observedGeneration": w.GetGeneration(),
			"conditions":         []interface{}{map[string]interface{}{"type": "Ready", "status": ready, "reason": "ByTest"}},
		}
		_, err = suite.Dynamic.Resource(widgets).Namespace(ns).UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// updated is the parent's Updated condition: reason and message.
func updated(t *testing.T, ns, name string) (reason, message string) {
	t.Helper()
	c := engine.StatusCondition(suite.GetHello(t, ns, name), engine.UpdatedCondition)
	reason, _ = c["reason"].(string)
	message, _ = c["message"].(string)
	return reason, message
}

// revisionsOf are the names of the parent's ControllerRevisions, and the
// children each claims.
func revisionsOf(t *testing.T, ns string, parent *unstructured.Unstructured) map[string][]string {
	t.Helper()
	list, err := suite.Client.MetacontrollerV1alpha1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, rev := range list.Items {
		if ref := metav1.GetControllerOf(&rev); ref == nil || ref.UID != parent.GetUID() {
			continue
		}
		var names []string
		for _, ck := range rev.Children {
			names = append(names, ck.Names...)
		}
		sort.Strings(names)
		out[rev.Name] = names
	}
	return out
}

// startRollout creates a parent with Widgets names, all blue and healthy,
// and waits until it is on its first revision.
func startRollout(t *testing.T, ns, name, ctrl string, names []string) *unstructured.Unstructured {
	t.Helper()
	items := make([]interface{}, len(names))
	for i, n := range names {
		items[i] = n
	}
	suite.CreateHello(t, ns, name, ctrl, map[string]interface{}{"color": "blue", "widgets": items})
	t.Cleanup(func() {
		if t.Failed() {
			reason, msg := updated(t, ns, name)
			t.Logf("parent %s: Updated %s %q; Events:\n%s", name, reason, msg, strings.Join(events(t, ns, name), "\n"))
		}
	})
	parent := suite.WaitObserved(t, ns, name, 1)
	suite.Eventually(t, "the Widgets of "+name, func() (bool, error) {
		return len(widgetsOf(t, ns, parent)) == len(names), nil
	})
	for _, n := range names {
		setWidgetStatus(t, ns, name+"-"+n, "True")
	}
	suite.Eventually(t, name+" on its first revision", func() (bool, error) {
		reason, msg := updated(t, ns, name)
		return unless(reason == engine.ReasonOnLatestRevision, fmt.Errorf("Updated: %s %s", reason, msg))
	})
	if revs := revisionsOf(t, ns, parent); len(revs) != 1 {
		t.Fatalf("revisions %v, want one", revs)
	}
	return parent
}

// driveRollout plays the Widgets' controller until every Widget has color:
// each time a Widget moves (its generation is not observed yet, or, when
// recreated, it has no status), it marks it healthy. It asserts that at no
// time more than one Widget has moved without being healthy, and that they
// move in the order of names. It returns the order in which they moved.
func driveRollout(t *testing.T, ns string, parent *unstructured.Unstructured, names []string, color string) []string {
	t.Helper()
	var moved []string
	done := map[string]bool{}
	suite.Eventually(t, fmt.Sprintf("every Widget of %s %s", parent.GetName(), color), func() (bool, error) {
		ws := widgetsOf(t, ns, parent)
		var unhealthy []string
		for _, n := range names {
			if w, ok := ws[n]; ok && w.Color == color && !w.Healthy {
				unhealthy = append(unhealthy, n)
			}
		}
		if len(unhealthy) > 1 {
			t.Fatalf("Widgets %v moved to %s together; a rolling update moves one at a time", unhealthy, color)
		}
		for _, n := range unhealthy {
			if !done[n] {
				done[n] = true
				moved = append(moved, n)
			}
			setWidgetStatus(t, ns, parent.GetName()+"-"+n, "True")
		}
		for _, n := range names {
			if w, ok := ws[n]; !ok || w.Color != color || !w.Healthy {
				return false, fmt.Errorf("widgets %v", ws)
			}
		}
		return true, nil
	})
	return moved
}

// waitRollingParents waits for the CompositeController ctrl to count n
// parents mid-rollout in its status.
func waitRollingParents(t *testing.T, ctrl string, n int32) {
	t.Helper()
	suite.Eventually(t, fmt.Sprintf("the CompositeController to count %d parents mid-rollout", n), func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), ctrl, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return unless(got.Status.RollingParents == n, fmt.Errorf("rollingParents %d", got.Status.RollingParents))
	})
}

func TestRollingInPlaceMovesOneChildAtATimeAndHaltsOnAFailedCheck(t *testing.T) {
	t.Parallel()
	ctrl := "rolling-inplace"
	ns := rollingSetUp(t, ctrl, "RollingInPlace")
	names := []string{"a", "b", "c", "d", "e"}
	parent := startRollout(t, ns, "p", ctrl, names)
	before := widgetsOf(t, ns, parent)
	firstRevisions := revisionsOf(t, ns, parent)

	suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"color": "red", "widgets": []interface{}{"a", "b", "c", "d", "e"}})

	// a and b move, one at a time.
	for i, n := range names[:2] {
		suite.WaitForEvent(t, ns, "p", engine.ReasonRolloutProgressing, "Widget p-"+n+" moves to ControllerRevision", time.Minute)
		suite.Eventually(t, "Widget p-"+n+" red", func() (bool, error) {
			ws := widgetsOf(t, ns, parent)
			return ws[n].Color == "red", nil
		})
		// It has moved and its controller has not observed it yet: the
		// rollout waits for it, and nothing else moves.
		suite.WaitForEvent(t, ns, "p", engine.ReasonRolloutWaiting, "Widget p-"+n+": status.observedGeneration 1 has not reached generation 2", time.Minute)
		ws := widgetsOf(t, ns, parent)
		for j, m := range names {
			want := "blue"
			if j <= i {
				want = "red"
			}
			if ws[m].Color != want {
				t.Fatalf("after %s moved, Widget %s is %s, want %s (widgets %v)", n, m, ws[m].Color, want, ws)
			}
		}
		setWidgetStatus(t, ns, "p-"+n, "True")
	}

	// c moves, and its controller says it is not Ready: the rollout halts
	// there, says why, and the preview says the same.
	suite.Eventually(t, "Widget p-c red", func() (bool, error) { return widgetsOf(t, ns, parent)["c"].Color == "red", nil })
	setWidgetStatus(t, ns, "p-c", "False")
	stall := `Widget p-c: condition "Ready" has status "False", want "True"`
	suite.WaitForEvent(t, ns, "p", engine.ReasonRolloutWaiting, stall, time.Minute)
	suite.Eventually(t, "the parent's Updated condition to say why it waits", func() (bool, error) {
		reason, msg := updated(t, ns, "p")
		return unless(reason == engine.ReasonRolloutWaiting && strings.Contains(msg, stall), fmt.Errorf("Updated: %s %s", reason, msg))
	})
	if ws := widgetsOf(t, ns, parent); ws["d"].Color != "blue" || ws["e"].Color != "blue" {
		t.Fatalf("the rollout went on past a child that is not Ready: %v", ws)
	}
	waitRollingParents(t, ctrl, 1)
	preview, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(context.Background(), ctrl, &v1alpha1.SyncRequest{
		Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: "p"}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	r := preview.Status.Rollout
	if r == nil || r.Reason != engine.ReasonRolloutWaiting || !strings.Contains(r.Message, stall) || len(r.Revisions) != 2 || r.Next != "" {
		t.Fatalf("preview rollout %+v", r)
	}
	for _, item := range preview.Status.Plan {
		wantLatest := item.Name == "p-a" || item.Name == "p-b" || item.Name == "p-c"
		if (item.Revision == r.LatestRevision) != wantLatest || item.Action != v1alpha1.SyncActionUnchanged {
			t.Errorf("preview of %s: %s on revision %s (latest %s): %s", item.Name, item.Action, item.Revision, r.LatestRevision, item.Reason)
		}
		if !wantLatest && !strings.Contains(item.Reason, "older ControllerRevision") {
			t.Errorf("preview does not say why %s waits: %q", item.Name, item.Reason)
		}
	}

	// Ready again: the rollout goes on to the end, one at a time, in order.
	setWidgetStatus(t, ns, "p-c", "True")
	if moved := driveRollout(t, ns, parent, names, "red"); strings.Join(moved, "") != "de" {
		t.Errorf("after c, Widgets moved in the order %v, want d, e", moved)
	}
	suite.Eventually(t, "the parent on its latest revision", func() (bool, error) {
		reason, msg := updated(t, ns, "p")
		return unless(reason == engine.ReasonOnLatestRevision, fmt.Errorf("Updated: %s %s", reason, msg))
	})
	suite.WaitForEvent(t, ns, "p", "RolloutComplete", "every child is on ControllerRevision", time.Minute)
	// The old revision goes once no child follows it.
	suite.Eventually(t, "one ControllerRevision, the latest", func() (bool, error) {
		revs := revisionsOf(t, ns, parent)
		for name, children := range revs {
			if _, old := firstRevisions[name]; old || len(revs) != 1 || len(children) != 5 {
				return false, fmt.Errorf("revisions %v", revs)
			}
		}
		return unless(len(revs) == 1, fmt.Errorf("revisions %v", revs))
	})
	for n, w := range widgetsOf(t, ns, parent) {
		if w.UID != before[n].UID {
			t.Errorf("RollingInPlace recreated Widget %s", n)
		}
	}
	waitRollingParents(t, ctrl, 0)
}

func TestRollingRecreateDeletesOneChildAtATime(t *testing.T) {
	t.Parallel()
	ctrl := "rolling-recreate"
	ns := rollingSetUp(t, ctrl, "RollingRecreate")
	names := []string{"a", "b", "c"}
	parent := startRollout(t, ns, "q", ctrl, names)
	uids := map[string]string{}
	for n, w := range widgetsOf(t, ns, parent) {
		uids[n] = w.UID
	}

	suite.SetHelloSpec(t, ns, "q", map[string]interface{}{"color": "red", "widgets": []interface{}{"a", "b", "c"}})
	for i, n := range names {
		// The next Widget is recreated: a new UID, the new color, no
		// status yet, so the rollout waits for it.
		suite.Eventually(t, "Widget q-"+n+" recreated red", func() (bool, error) {
			w, ok := widgetsOf(t, ns, parent)[n]
			return ok && w.UID != uids[n] && w.Color == "red", nil
		})
		if i == len(names)-1 {
			// As in Metacontroller, the rollout is over once the last child
			// has moved: every child is on the latest revision.
			suite.WaitForEvent(t, ns, "q", "RolloutComplete", "every child is on ControllerRevision", time.Minute)
			break
		}
		suite.WaitForEvent(t, ns, "q", engine.ReasonRolloutWaiting, "Widget q-"+n+`: condition "Ready" is missing`, time.Minute)
		ws := widgetsOf(t, ns, parent)
		for _, m := range names[i+1:] {
			if ws[m].UID != uids[m] || ws[m].Color != "blue" {
				t.Fatalf("Widget %s was recreated before %s was Ready: %v", m, n, ws)
			}
		}
		setWidgetStatus(t, ns, "q-"+n, "True")
	}
	suite.Eventually(t, "the parent on its latest revision", func() (bool, error) {
		reason, msg := updated(t, ns, "q")
		return unless(reason == engine.ReasonOnLatestRevision, fmt.Errorf("Updated: %s %s", reason, msg))
	})
}

func TestRollingParentChangedTwiceMidRolloutEndsOnTheLatest(t *testing.T) {
	t.Parallel()
	ctrl := "rolling-twice"
	ns := rollingSetUp(t, ctrl, "RollingInPlace")
	names := []string{"a", "b", "c", "d"}
	parent := startRollout(t, ns, "r", ctrl, names)
	before := widgetsOf(t, ns, parent)
	spec := func(color string) map[string]interface{} {
		return map[string]interface{}{"color": color, "widgets": []interface{}{"a", "b", "c", "d"}}
	}

	suite.SetHelloSpec(t, ns, "r", spec("red"))
	suite.Eventually(t, "Widget r-a red", func() (bool, error) { return widgetsOf(t, ns, parent)["a"].Color == "red", nil })
	setWidgetStatus(t, ns, "r-a", "True")
	suite.Eventually(t, "Widget r-b red", func() (bool, error) { return widgetsOf(t, ns, parent)["b"].Color == "red", nil })
	// Three revisions now: blue (c, d), red (a, b) and green (none yet).
	suite.SetHelloSpec(t, ns, "r", spec("green"))
	suite.Eventually(t, "three ControllerRevisions", func() (bool, error) {
		revs := revisionsOf(t, ns, parent)
		return unless(len(revs) == 3, fmt.Errorf("revisions %v", revs))
	})
	setWidgetStatus(t, ns, "r-b", "True")
	driveRollout(t, ns, parent, names, "green")
	suite.Eventually(t, "the parent on its latest revision, alone", func() (bool, error) {
		reason, msg := updated(t, ns, "r")
		revs := revisionsOf(t, ns, parent)
		return unless(reason == engine.ReasonOnLatestRevision && len(revs) == 1, fmt.Errorf("Updated: %s %s; revisions %v", reason, msg, revs))
	})
	after := widgetsOf(t, ns, parent)
	if len(after) != len(names) {
		t.Fatalf("widgets %v, want exactly %v", after, names)
	}
	for n, w := range after {
		if w.UID != before[n].UID {
			t.Errorf("Widget %s was recreated", n)
		}
	}
}

// unless is ok with no error, or not ok with err, which eventually keeps as
// the last reason to wait.
func unless(ok bool, err error) (bool, error) {
	if ok {
		return true, nil
	}
	return false, err
}
