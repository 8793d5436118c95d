package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChildEventsBudget: the binary run with --child-events-burst=2 and a
// rate that refills nothing within the test records the Events of what
// its syncs did to children for two parents of four, says on the
// CompositeController that it drops the others, counts them in
// composite_controller_child_events_dropped_total, and still records the
// Warnings of a child that fails. Every parent gets its children and its
// status whatever its Events.
func TestChildEventsBudget(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	hook := suite.HelloHook(t)
	suite.RestartWith(t, "--child-events-qps=0.0001", "--child-events-burst=2")
	ns := suite.Namespace(t, "loop-child-events")
	const name = "loop-child-events"
	framework.HelloController{Name: name, HookURL: hook.URL}.Create(t, suite)

	for i := range 4 {
		suite.CreateHello(t, ns, fmt.Sprintf("p%d", i), name, framework.HelloSpec("blue", "a"))
	}
	suite.WaitConfigMaps(t, ns, "p0-a", "p1-a", "p2-a", "p3-a")
	for i := range 4 {
		p := suite.GetHello(t, ns, fmt.Sprintf("p%d", i))
		suite.WaitObserved(t, ns, p.GetName(), p.GetGeneration())
	}
	// Recorded after the drop, through the same broadcaster: once it is
	// there, the Events recorded before it are too.
	waitControllerEvent(t, ccUID(t, name), "ChildEventsThrottled", "over this controller's budget (0.0001 a second after a burst of 2")

	created, err := suite.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=ChildCreated"})
	if err != nil {
		t.Fatal(err)
	}
	var about []string
	for _, e := range created.Items {
		about = append(about, e.InvolvedObject.Name+": "+e.Message)
	}
	if len(created.Items) != 2 {
		t.Errorf("ChildCreated Events of 4 parents with a burst of 2: %d, want 2:\n%s", len(created.Items), strings.Join(about, "\n"))
	}
	series := `composite_controller_child_events_dropped_total{controller="` + name + `"}`
	if got := metricValue(t, suite.CompositeGet(t, "/metrics"), series); got != 2 {
		t.Errorf("%s = %v, want 2", series, got)
	}

	// Over the budget, a child kube-apiserver refuses (a name with capitals)
	// is still said, with a Warning.
	suite.CreateHello(t, ns, "p4", name, framework.HelloSpec("blue", "Bad"))
	suite.WaitForEvent(t, ns, "p4", "ChildError", "p4-Bad", time.Minute)
}
