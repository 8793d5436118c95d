package loop

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// statusCall is what a hook saw in one call: the parent's status.phase
// and its poke annotation (the test's outside event).
type statusCall struct{ phase, poke string }

func (c statusCall) String() string { return fmt.Sprintf("(%q %q)", c.phase, c.poke) }

// callLog is a hook's calls, in order.
type callLog struct{ record[statusCall] }

// waitCall waits for a call that saw poke: the fresh signal that every
// event before that poke has been handled (the loop syncs one parent at a
// time, and a poke's sync reads everything again).
func (l *callLog) waitCall(t *testing.T, poke string) {
	t.Helper()
	suite.Eventually(t, "a hook call that sees poke="+poke, func() (bool, error) {
		for _, c := range l.get() {
			if c.poke == poke {
				return true, nil
			}
		}
		return false, nil
	})
}

// phaseHook is a hook with no children written as a state machine over
// its own status, as Metacontroller's users write them: each call moves
// status.phase one step, absent → A → B → C, and C stays.
func phaseHook(t *testing.T, log *callLog) *httptest.Server {
	next := map[string]string{"": "A", "A": "B", "B": "C", "C": "C"}
	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		phase, _, _ := unstructured.NestedString(req.Parent.Object, "status", "phase")
		log.add(statusCall{phase: phase, poke: req.Parent.GetAnnotations()["poke"]})
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"phase": next[phase]}}, nil
	})))
	t.Cleanup(hook.Close)
	return hook
}

// phaseParent is where a test of phaseHook starts: the controller ctrl
// of the hook, its spec edited by spec when not nil, and its parent p in
// the namespace ctrl. It returns the namespace and the hook's calls.
func phaseParent(t *testing.T, ctrl string, spec func(*acv1alpha1.CompositeControllerSpecApplyConfiguration)) (string, *callLog) {
	t.Helper()
	suite.SetUpHellos(t)
	ns := suite.Namespace(t, ctrl)
	log := &callLog{}
	framework.HelloController{Name: ctrl, HookURL: phaseHook(t, log).URL, Spec: spec}.Create(t, suite)
	suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{})
	return ns, log
}

// poke annotates a parent with kubectl, as a user would: a change that is
// not the loop's own, so it syncs the parent.
func poke(t *testing.T, resource, ns, name, value string) {
	t.Helper()
	if _, stderr, err := suite.Kubectl(context.Background(), "annotate", "--overwrite", "-n", ns, resource, name, "poke="+value); err != nil {
		t.Fatalf("kubectl annotate %s %s: %v: %s", resource, name, err, stderr)
	}
}

func parentPhase(t *testing.T, ns, name string) string {
	t.Helper()
	phase, _, _ := unstructured.NestedString(suite.GetHello(t, ns, name).Object, "status", "phase")
	return phase
}

// TestAHookThatReadsItsOwnStatusAdvancesOnItsEcho (issue 29 item 9, T8):
// Metacontroller syncs a parent again when its own status write lands, so
// a hook that moves status.phase one step a call reaches its last state in
// seconds, with no outside event; it stayed at A here until the 30-minute
// resync. Once the hook answers what is stored, nothing more is written,
// and a converged parent costs no call: a poke afterwards is the only call
// after the one that saw C.
func TestAHookThatReadsItsOwnStatusAdvancesOnItsEcho(t *testing.T) {
	t.Parallel()
	ns, log := phaseParent(t, "status-echoes", nil)
	suite.Eventually(t, "status.phase C, moved by the echoes of the hook's own status writes", func() (bool, error) {
		if phase := parentPhase(t, ns, "p"); phase != "C" {
			return false, fmt.Errorf("status.phase %q; hook calls %v", phase, log.get())
		}
		return true, nil
	})
	poke(t, "hellos.example.com", ns, "p", "1")
	log.waitCall(t, "1")
	want := []statusCall{{"", ""}, {"A", ""}, {"B", ""}, {"C", ""}, {"C", "1"}}
	if got := log.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hook calls %v; want %v: one per status step, one that sees C and writes nothing, and then none until the poke", got, want)
	}
}

// TestWithOwnStatusWritesIgnoredTheHookIsCalledOnlyOnChanges: a
// controller whose hook does not read its own status says
// spec.ownStatusWrites: Ignore, and the echo of its status write calls
// nothing. The same hook then moves one step per outside change: the
// parent stays at A after its first call, and each poke moves it one step.
func TestWithOwnStatusWritesIgnoredTheHookIsCalledOnlyOnChanges(t *testing.T) {
	t.Parallel()
	ns, log := phaseParent(t, "status-echoes-ignored", func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithOwnStatusWrites(v1alpha1.OwnStatusWritesIgnore)
	})
	suite.Eventually(t, "status.phase A", func() (bool, error) { return parentPhase(t, ns, "p") == "A", nil })
	poke(t, "hellos.example.com", ns, "p", "1")
	log.waitCall(t, "1")
	suite.Eventually(t, "status.phase B after the poke", func() (bool, error) { return parentPhase(t, ns, "p") == "B", nil })
	poke(t, "hellos.example.com", ns, "p", "2")
	log.waitCall(t, "2")
	want := []statusCall{{"", ""}, {"A", "1"}, {"B", "2"}}
	if got := log.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hook calls %v; want %v: one per outside change, none for the echoes of the status writes", got, want)
	}
}

// prunedCRD is a CRD whose status schema is structural and keeps only
// status.ready: kube-apiserver prunes observedGeneration and every other
// field a hook adds.
const prunedCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prunes.echoes.example.com
spec:
  group: echoes.example.com
  scope: Namespaced
  names: {plural: prunes, singular: prune, kind: Prune}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              ready: {type: boolean}
`

// TestAConvergedParentWithAPrunedStatusCostsNoHookCall (issue 29 item 10,
// T5): the hook's status holds a field the CRD prunes (and the loop adds
// observedGeneration, pruned too), so every sync makes a status write that
// kube-apiserver stores nothing of: same resourceVersion, no watch event.
// Awaited as an echo, that write resynced the parent when the echo timeout
// passed, and the resync wrote the same again: one hook call per timeout,
// forever. The server runs with a 2 s echo timeout, so a window of 10 s
// after a poke holds several timeouts; the hook must be called by the poke
// and the next poke only.
func TestAConvergedParentWithAPrunedStatusCostsNoHookCall(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	suite.SetUpHellos(t)
	suite.RestartWith(t, "--echo-timeout=2s")
	ctx := context.Background()
	suite.MustApply(t, prunedCRD+serverRights("echoes-prunes", "echoes.example.com", []string{"prunes", "prunes/status"}, parentVerbs...))
	if _, stderr, err := suite.Kubectl(ctx, "wait", "--for=condition=Established", "crd/prunes.echoes.example.com", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	const ctrl = "status-echoes-pruned"
	ns := suite.Namespace(t, ctrl)
	log := &callLog{}
	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		log.add(statusCall{poke: req.Parent.GetAnnotations()["poke"]})
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"ready": true, "message": "pruned by the CRD"}}, nil
	})))
	t.Cleanup(hook.Close)
	if err := suite.Apply(ctx, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource: {apiVersion: echoes.example.com/v1, resource: prunes}
  hooks:
    sync:
      webhook: {url: %s/sync, timeout: 3s}
`, ctrl, hook.URL)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), ctrl, metav1.DeleteOptions{})
	})
	suite.WaitRunning(t, ctrl)

	prunes := schema.GroupVersionResource{Group: "echoes.example.com", Version: "v1", Resource: "prunes"}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "echoes.example.com/v1", "kind": "Prune",
		"metadata": map[string]interface{}{"name": "p", "namespace": ns},
		"spec":     map[string]interface{}{},
	}}
	if _, err := suite.Dynamic.Resource(prunes).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "status.ready, with what the CRD does not keep pruned", func() (bool, error) {
		p, err := suite.Dynamic.Resource(prunes).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if status, _, _ := unstructured.NestedMap(p.Object, "status"); fmt.Sprint(status) != "map[ready:true]" {
			return false, fmt.Errorf("status %v", status)
		}
		return true, nil
	})
	// The poke syncs the parent, whose status write stores nothing.
	poke(t, "prunes.echoes.example.com", ns, "p", "1")
	log.waitCall(t, "1")
	before := len(log.get())
	time.Sleep(10 * time.Second) // five echo timeouts: the window measured
	poke(t, "prunes.echoes.example.com", ns, "p", "2")
	log.waitCall(t, "2")
	calls := log.get()
	if extra := len(calls) - before - 1; extra != 0 {
		t.Fatalf("%d hook calls in the 10 s after the poke's, besides the next poke's (calls %v): the status write that stored nothing was awaited as an echo, and its timeout resynced the parent", extra, calls)
	}
}
