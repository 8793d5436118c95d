package loop

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// echoHookCall is what the hook saw in one call: the parent's generation,
// the generation its status was written for, and how many children it
// observed.
type echoHookCall struct {
	generation int64
	statusGen  int64
	children   int
}

// TestTheLoopsOwnWritesDoNotCallTheHookAgain: a hook whose status reports
// the children it observed (as most real hooks do) is called once to
// create them and once, when they all exist, to report them; never with
// some of them only (issue 23 item 8, kube-controller-manager's
// expectations). The first call's status is not written: the second
// replaces it at once. With the default spec.ownStatusWrites: Sync the
// echo of that status write calls it a third time, as Metacontroller does
// (issue 29 item 9), and it answers what is stored: nothing more is
// written and nothing more calls it. Before issue 23, the hook could be
// called in between with part of its children.
func TestTheLoopsOwnWritesDoNotCallTheHookAgain(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	const ctrl, parents, children = "loop-echoes", 8, 5
	ns := suite.Namespace(t, ctrl)

	var mu sync.Mutex
	calls := map[string][]echoHookCall{}
	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		name := req.Parent.GetName()
		observed := len(req.Children["ConfigMap.v1"])
		statusGen, _, _ := unstructured.NestedInt64(req.Parent.Object, "status", "observedGeneration")
		mu.Lock()
		calls[name] = append(calls[name], echoHookCall{generation: req.Parent.GetGeneration(), statusGen: statusGen, children: observed})
		mu.Unlock()
		color, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "color")
		resp := &hookapi.SyncHookResponse{Status: map[string]interface{}{"observed": int64(observed), "color": color}}
		for i := 0; i < children; i++ {
			resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": fmt.Sprintf("%s-%d", name, i)},
				"data":     map[string]interface{}{"color": color},
			}})
		}
		return resp, nil
	})))
	t.Cleanup(hook.Close)
	framework.HelloController{Name: ctrl, HookURL: hook.URL}.Create(t, suite)

	reported := func(generation int64) {
		t.Helper()
		for i := 0; i < parents; i++ {
			name := fmt.Sprintf("p%d", i)
			suite.Eventually(t, fmt.Sprintf("parent %s reports its %d children at generation %d", name, children, generation), func() (bool, error) {
				p := suite.GetHello(t, ns, name)
				got, _, _ := unstructured.NestedInt64(p.Object, "status", "observed")
				gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
				return got == children && gen == generation, nil
			})
		}
	}
	for i := 0; i < parents; i++ {
		suite.CreateHello(t, ns, fmt.Sprintf("p%d", i), ctrl, map[string]interface{}{"color": "blue"})
	}
	reported(1)
	// The fresh signal that the first round is over for every parent: a
	// spec change, whose call can only come after the calls of the first
	// generation (the loop syncs one parent at a time).
	for i := 0; i < parents; i++ {
		name := fmt.Sprintf("p%d", i)
		suite.SetHelloSpec(t, ns, name, map[string]interface{}{"color": "green"})
	}
	for i := 0; i < parents; i++ {
		name := fmt.Sprintf("p%d", i)
		suite.Eventually(t, "a call about "+name+" at generation 2", func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			cs := calls[name]
			return len(cs) > 0 && cs[len(cs)-1].generation == 2, nil
		})
	}
	reported(2)

	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < parents; i++ {
		name := fmt.Sprintf("p%d", i)
		var first []echoHookCall
		for _, c := range calls[name] {
			if c.generation == 1 {
				first = append(first, c)
			}
			if c.children != 0 && c.children != children {
				t.Errorf("parent %s: the hook was called with %d of its %d children (calls %+v): the echoes of the loop's creates called it before they had all arrived", name, c.children, children, calls[name])
			}
		}
		if len(first) != 3 || first[0].children != 0 || first[1].children != children || first[2].children != children {
			t.Errorf("parent %s at generation 1: calls %+v; want three: one with no child, to create them, one with all %d, to report them, and one for the echo of that status write", name, first, children)
		} else if first[1].statusGen != 0 {
			t.Errorf("parent %s: the status was written before the hook saw the children (calls %+v): the first sync's status is replaced at once by the second's, and costs a write and its echo", name, first)
		} else if first[2].statusGen != 1 {
			t.Errorf("parent %s: the third call did not see the status the second wrote (calls %+v)", name, first)
		}
	}
	// Nothing was lost on the way: every child is there, green.
	cms, err := suite.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	green := 0
	for _, cm := range cms.Items {
		if cm.Data["color"] == "green" {
			green++
		}
	}
	if green != parents*children {
		t.Errorf("%d green ConfigMaps, want %d", green, parents*children)
	}
}

// TestAControllerThatIgnoresItsOwnChildWritesIsCalledOncePerChange: with
// spec.ownChildWrites: Ignore (and ownStatusWrites: Ignore, since the hook
// does not read its status either), the hook is called once to create a
// parent's children and not again for their echoes or its status write's,
// while a change by someone else (a child deleted) still calls it, and its
// status is written by the call that created them.
func TestAControllerThatIgnoresItsOwnChildWritesIsCalledOncePerChange(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	const ctrl, children = "loop-echoes-ignored", 3
	ns := suite.Namespace(t, ctrl)

	var mu sync.Mutex
	var calls []echoHookCall
	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		statusGen, _, _ := unstructured.NestedInt64(req.Parent.Object, "status", "observedGeneration")
		mu.Lock()
		calls = append(calls, echoHookCall{generation: req.Parent.GetGeneration(), statusGen: statusGen, children: len(req.Children["ConfigMap.v1"])})
		mu.Unlock()
		color, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "color")
		resp := &hookapi.SyncHookResponse{Status: map[string]interface{}{"color": color}}
		for i := 0; i < children; i++ {
			resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": fmt.Sprintf("p-%d", i)},
				"data":     map[string]interface{}{"color": color},
			}})
		}
		return resp, nil
	})))
	t.Cleanup(hook.Close)
	framework.HelloController{Name: ctrl, HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithOwnChildWrites(v1alpha1.OwnChildWritesIgnore).WithOwnStatusWrites(v1alpha1.OwnStatusWritesIgnore)
	}}.Create(t, suite)

	suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{"color": "blue"})
	suite.WaitConfigMaps(t, ns, "p-0", "p-1", "p-2")
	suite.Eventually(t, "the status of the call that created the children", func() (bool, error) {
		gen, _, _ := unstructured.NestedInt64(suite.GetHello(t, ns, "p").Object, "status", "observedGeneration")
		return gen == 1, nil
	})
	// Someone else deletes a child: the hook is called, and it comes back.
	ctx := context.Background()
	old, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "p-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "ConfigMap p-1 created again", func() (bool, error) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p-1", metav1.GetOptions{})
		return err == nil && cm.UID != old.UID, nil
	})
	// The fresh signal that generation 1 is over: a call at generation 2.
	suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"color": "green"})
	suite.Eventually(t, "a call at generation 2", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0 && calls[len(calls)-1].generation == 2, nil
	})

	mu.Lock()
	defer mu.Unlock()
	var first []int
	for _, c := range calls {
		if c.generation == 1 {
			first = append(first, c.children)
		}
	}
	if fmt.Sprint(first) != fmt.Sprint([]int{0, children - 1}) {
		t.Errorf("at generation 1 the hook saw %v children in its calls; want [0 %d]: one call to create them, none for their echoes, one for the child someone deleted, none for its recreation's echo (all calls: %+v)", first, children-1, calls)
	}
}
