package rollout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// TestRolloutPauseAndResumeBetweenStepsStillMovesTheNextStep lands a change
// in steps of 10 %, 50 % and 100 %, each followed by a pause, and runs
// kubectl composite rollout pause then resume in the pause after the first
// step, as an operator who stops to look does. The rollout goes on where
// it was: the second step begins, moves the parents of its 50 % to the new
// hook (status.rollout.bucketLimit 5000) and passes on them, and only then
// does the third step begin and move the others.
func TestRolloutPauseAndResumeBetweenStepsStillMovesTheNextStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, ns = "rollout-pause-resume", "rollout-pause-resume"
	const steps = `    - percent: 10
      pauseSeconds: 20
    - percent: 50
      pauseSeconds: 20
    - percent: 100
    health:
      deadlineSeconds: 60
`
	hook, parents := convergedFleet(t, name, ns, steps, 24)
	watch := watchRollout(t, name)

	changed := time.Now()
	suite.MustApply(t, rolloutControllerWith(name, hook.url, "v2", steps))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 3 passed", changed)
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.Status.Rollout == nil {
		t.Fatalf("no status.rollout once step 1 passed: %v", err)
	}
	// The status the controller showed before the change is not this rollout's.
	revision := got.Status.Rollout.UpdateRevision
	if r := kubectlComposite(t, "rollout", "pause", name); r.code != 0 {
		t.Fatalf("kubectl composite rollout pause: exit %d", r.code)
	}
	suite.Within(t, "status.rollout paused", 30*time.Second, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Rollout != nil && got.Status.Rollout.Phase == v1alpha1.RolloutPaused, err
	})
	if e := findEvent(t, name, "RolloutStepBegun", "step 2 of 3", changed); e != nil {
		t.Fatalf("step 2 began (%q) before the pause took effect: this machine is too slow for the test's 20 s pause between steps", e.Message)
	}
	if r := kubectlComposite(t, "rollout", "resume", name); r.code != 0 {
		t.Fatalf("kubectl composite rollout resume: exit %d", r.code)
	}

	var begun2, passed2 *corev1.Event
	suite.Within(t, "step 2 of 3 beginning or passing", 2*time.Minute, func() (bool, error) {
		begun2 = findEvent(t, name, "RolloutStepBegun", "step 2 of 3", changed)
		passed2 = findEvent(t, name, "RolloutStepPassed", "step 2 of 3", changed)
		return begun2 != nil || passed2 != nil, nil
	})
	if begun2 == nil {
		t.Errorf("after rollout pause and resume between steps 1 and 2, step 2 passed (%q) with no RolloutStepBegun Event: its move was skipped", passed2.Message)
	}
	controllerEvent(t, name, "RolloutComplete", "complete", changed)

	passed2 = findEvent(t, name, "RolloutStepPassed", "step 2 of 3", changed)
	begun3 := findEvent(t, name, "RolloutStepBegun", "step 3 of 3", changed)
	if passed2 == nil || begun3 == nil {
		t.Fatalf("a complete rollout without Events of step 2 passing (%v) and step 3 beginning (%v)", passed2, begun3)
	}
	if eventTime(begun3).Before(eventTime(passed2)) {
		t.Errorf("step 3 began at %s, before step 2 passed at %s", eventTime(begun3).Format(time.TimeOnly), eventTime(passed2).Format(time.TimeOnly))
	}

	// What the status said while step 2 was under way, and when it passed.
	var limits []int32
	var passedAt time.Time
	for _, s := range watch.history() {
		if s.status.UpdateRevision != revision {
			continue
		}
		under := s.status.Phase == v1alpha1.RolloutProgressing && s.status.Step == 1 && s.status.StepStartTime != nil
		if under && (len(limits) == 0 || limits[len(limits)-1] != s.status.BucketLimit) {
			limits = append(limits, s.status.BucketLimit)
		}
		if s.status.Step >= 2 && passedAt.IsZero() {
			passedAt = s.at
		}
	}
	if len(limits) == 0 || limits[0] != 5000 || len(limits) > 1 {
		t.Errorf("status.rollout.bucketLimit while step 2 (50 %%) was under way: %v, want [5000]", limits)
	}
	if passedAt.IsZero() {
		t.Fatalf("status.rollout was never seen past step 2")
	}
	// Step 2's share met the new hook before the step passed; the parents
	// of step 3 only after.
	for _, p := range parents {
		first := hook.firstCall(ns+"/"+p.name, "v2")
		switch b := rollout.Bucket(p.uid); {
		case b < 1000:
		case b < 5000 && (first.IsZero() || first.After(passedAt)):
			t.Errorf("%s, of step 2's 50 %% (bucket %d), first met revision 2 at %s, not before step 2 passed at %s", p.name, b, stampOf(first), stampOf(passedAt))
		case b >= 5000 && !first.IsZero() && first.Before(passedAt):
			t.Errorf("%s, of step 3 (bucket %d), met revision 2 at %s, before step 2 passed at %s", p.name, b, stampOf(first), stampOf(passedAt))
		}
	}
}

// TestRolloutStepsCutMidRolloutAreRefused cuts spec.rollout.steps to a
// single step while the rollout waits after its first: the patch is
// refused with an error naming status.rollout.step, the server serves on,
// and the rollout goes on through its three steps.
func TestRolloutStepsCutMidRolloutAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name, ns = "rollout-steps-cut", "rollout-steps-cut"
	const steps = `    - percent: 10
      pauseSeconds: 30
    - percent: 50
    - percent: 100
    health:
      deadlineSeconds: 60
`
	hook, _ := convergedFleet(t, name, ns, steps, 12)

	changed := time.Now()
	suite.MustApply(t, rolloutControllerWith(name, hook.url, "v2", steps))
	controllerEvent(t, name, "RolloutStepPassed", "step 1 of 3 passed", changed)
	exits := len(suite.UnexpectedExits())
	_, stderr, err := suite.Kubectl(ctx, "patch", "cc", name, "--type=merge", "-p", `{"spec":{"rollout":{"steps":[{"percent":100}]}}}`)
	switch {
	case err == nil:
		t.Errorf("kubectl patch cutting spec.rollout.steps to 1 while status.rollout.step is 1: accepted, want it refused")
	case !strings.Contains(stderr, "status.rollout.step"):
		t.Errorf("kubectl patch cutting spec.rollout.steps to 1: %v: %s; want an error naming status.rollout.step", err, stderr)
	default:
		t.Logf("kubectl patch cutting spec.rollout.steps to 1: refused: %s", stderr)
	}
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GET of the controller after the patch: %v", err)
	}
	if n := len(got.Spec.Rollout.Steps); n != 3 {
		t.Errorf("after the refused patch the controller has %d steps, want its 3", n)
	}

	controllerEvent(t, name, "RolloutStepBegun", "step 2 of 3", changed)
	controllerEvent(t, name, "RolloutComplete", "complete", changed)
	if _, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("GET of the controller once the rollout completed: %v", err)
	}
	for _, e := range suite.UnexpectedExits()[exits:] {
		t.Errorf("a stack process ended after the patch: %s", e)
	}
}

// fleetParent is a parent of convergedFleet's.
type fleetParent struct {
	name string
	uid  types.UID
}

// convergedFleet starts the controller name at revision v1 with rollout's
// steps (startRollout) and n parents of it; it returns its hook and the
// parents once each one's ConfigMap names v1.
func convergedFleet(t *testing.T, name, ns, rollout string, n int) (*revisionHook, []fleetParent) {
	t.Helper()
	ctx := context.Background()
	hook := startRollout(t, name, ns, rollout)
	var names []string
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("p-%02d", i)
		suite.CreateHello(t, ns, p, name, map[string]interface{}{"greeting": "hello"})
		names = append(names, p)
	}
	waitRevisions(t, ns, names, func(string) string { return "v1" }, 3*time.Minute)
	var out []fleetParent
	for _, p := range names {
		u, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fleetParent{name: p, uid: u.GetUID()})
	}
	return hook, out
}

// findEvent is the first Event of reason on the CompositeController name
// whose message contains substring, recorded since; nil when there is none.
func findEvent(t *testing.T, name, reason, substring string, since time.Time) *corev1.Event {
	t.Helper()
	list, err := suite.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	var first *corev1.Event
	for i, e := range list.Items {
		at := eventTime(&e)
		if !strings.Contains(e.Message, substring) || at.Before(since.Truncate(time.Second)) {
			continue
		}
		if first == nil || at.Before(eventTime(first)) {
			first = &list.Items[i]
		}
	}
	return first
}

// eventTime is when e was first recorded, by whichever API recorded it.
func eventTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func stampOf(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Format(time.StampMilli)
}

// rolloutWatch keeps every status.rollout a controller showed, polled
// more often than the driver's tick writes it.
type rolloutWatch struct {
	mu   sync.Mutex
	seen []rolloutSeen
}

type rolloutSeen struct {
	at     time.Time
	status v1alpha1.RolloutStatus
}

// watchRollout polls the CompositeController name's status.rollout until
// t ends.
func watchRollout(t *testing.T, name string) *rolloutWatch {
	w := &rolloutWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			for _, s := range w.history() {
				st := s.status
				t.Logf("%s status.rollout: revision %d %s step %d began %v bucketLimit %d: %s",
					s.at.Format(time.StampMilli), st.UpdateRevision, st.Phase, st.Step, st.StepStartTime != nil, st.BucketLimit, st.Message)
			}
		}
	})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
			if err == nil && got.Status.Rollout != nil {
				w.add(*got.Status.Rollout)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *rolloutWatch) add(st v1alpha1.RolloutStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.seen); n > 0 {
		last := w.seen[n-1].status
		if last.Phase == st.Phase && last.Step == st.Step && last.BucketLimit == st.BucketLimit &&
			(last.StepStartTime == nil) == (st.StepStartTime == nil) && last.UpdateRevision == st.UpdateRevision {
			return
		}
	}
	w.seen = append(w.seen, rolloutSeen{at: time.Now(), status: st})
}

// history is what the controller showed so far, in order.
func (w *rolloutWatch) history() []rolloutSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]rolloutSeen(nil), w.seen...)
}
