package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

func TestParentGetsOwnedChildrenAndStatus(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-basic")
	framework.HelloController{Name: "loop-basic", HookURL: hook.URL}.Create(t, suite)

	s := framework.HelloSpec("blue", "a", "b")
	s["service"] = true
	parent := suite.CreateHello(t, ns, "p", "loop-basic", s)

	cms := suite.WaitConfigMaps(t, ns, "p-a", "p-b")
	for _, cm := range cms {
		if !framework.OwnedBy(&cm, parent) {
			t.Errorf("ConfigMap %s is not controlled by its parent: %v", cm.Name, cm.OwnerReferences)
		}
		if cm.Data["color"] != "blue" {
			t.Errorf("ConfigMap %s data %v, want color blue", cm.Name, cm.Data)
		}
	}
	suite.Eventually(t, "Service p", func() (bool, error) {
		svc, err := suite.Kube.CoreV1().Services(ns).Get(context.Background(), "p", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return framework.OwnedBy(svc, parent), nil
	})
	got := suite.WaitObserved(t, ns, "p", parent.GetGeneration())
	if c, _, _ := unstructured.NestedString(got.Object, "status", "color"); c != "blue" {
		t.Errorf("parent status %v, want the hook's color blue", got.Object["status"])
	}
	waitEvent(t, ns, "p", "ChildCreated")

	// The CompositeController says how it runs.
	suite.Eventually(t, "CompositeController status counts the parent", func() (bool, error) {
		c, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), "loop-basic", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return c.Status.Parents == 1 && c.Status.Children == 3 && c.Status.LastSyncTime != nil &&
			meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionHookReachable), nil
	})
}

func TestUpdateStrategies(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	for _, tc := range []struct {
		method string
		check  func(t *testing.T, before, after corev1.ConfigMap)
	}{
		{"OnDelete", func(t *testing.T, before, after corev1.ConfigMap) {
			if after.Data["color"] != "blue" || after.UID != before.UID {
				t.Errorf("OnDelete: child changed (%v, uid %s -> %s); it must wait until deleted", after.Data, before.UID, after.UID)
			}
		}},
		{"InPlace", func(t *testing.T, before, after corev1.ConfigMap) {
			if after.Data["color"] != "green" || after.UID != before.UID {
				t.Errorf("InPlace: child %v uid %s -> %s, want green with the same uid", after.Data, before.UID, after.UID)
			}
		}},
		{"Recreate", func(t *testing.T, before, after corev1.ConfigMap) {
			if after.Data["color"] != "green" || after.UID == before.UID {
				t.Errorf("Recreate: child %v uid %s -> %s, want green with a new uid", after.Data, before.UID, after.UID)
			}
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			name := "loop-" + strings.ToLower(tc.method)
			ns := suite.Namespace(t, name)
			framework.HelloController{Name: name, HookURL: hook.URL, Method: tc.method}.Create(t, suite)
			suite.CreateHello(t, ns, "p", name, framework.HelloSpec("blue", "a"))
			before := suite.WaitConfigMaps(t, ns, "p-a")["p-a"]

			generation := suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green", "a"))
			suite.WaitObserved(t, ns, "p", generation)
			var after corev1.ConfigMap
			if tc.method == "OnDelete" {
				after = suite.ConfigMaps(t, ns)["p-a"]
			} else {
				suite.Eventually(t, "p-a green", func() (bool, error) {
					after = suite.ConfigMaps(t, ns)["p-a"]
					return after.Data["color"] == "green", nil
				})
			}
			tc.check(t, before, after)
		})
	}
}

func TestChildrenFollowTheHook(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-follow")
	framework.HelloController{Name: "loop-follow", HookURL: hook.URL, Method: "InPlace"}.Create(t, suite)
	parent := suite.CreateHello(t, ns, "p", "loop-follow", framework.HelloSpec("blue", "a", "b"))
	cms := suite.WaitConfigMaps(t, ns, "p-a", "p-b")

	t.Run("a child the hook stops returning is deleted", func(t *testing.T) {
		suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("blue", "a"))
		suite.WaitConfigMaps(t, ns, "p-a")
		waitEvent(t, ns, "p", "ChildDeleted")
	})
	t.Run("a child deleted by hand is recreated", func(t *testing.T) {
		if err := suite.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "p-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		suite.Eventually(t, "p-a recreated", func() (bool, error) {
			cm, ok := suite.ConfigMaps(t, ns)["p-a"]
			return ok && cm.UID != cms["p-a"].UID && framework.OwnedBy(&cm, parent), nil
		})
	})
	t.Run("a child edited by hand is restored", func(t *testing.T) {
		patch := []byte(`{"data":{"color":"vandalised"}}`)
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "p-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		suite.Eventually(t, "p-a restored", func() (bool, error) {
			return suite.ConfigMaps(t, ns)["p-a"].Data["color"] == "blue", nil
		})
	})
}

func TestAdoptionAndRelease(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-adopt")
	ctx := context.Background()
	framework.HelloController{Name: "loop-adopt", HookURL: hook.URL, Method: "InPlace", ParentSelector: true}.Create(t, suite)

	// Before the parent exists: an orphan its selector (app=p) matches, and
	// a matching object controlled by another owner.
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p-a", Namespace: ns, Labels: map[string]string{"app": "p"}}, Data: map[string]string{"color": "old"}}
	orphan, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, orphan, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p-b", Namespace: ns, Labels: map[string]string{"app": "p"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptrTo(true)}}},
		Data: map[string]string{"color": "theirs"}}
	if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	s := framework.HelloSpec("blue", "a", "b")
	s["selector"] = map[string]interface{}{"matchLabels": map[string]interface{}{"app": "p"}}
	parent := suite.CreateHello(t, ns, "p", "loop-adopt", s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events of p: %q", events(t, ns, "p"))
		}
	})
	suite.Eventually(t, "p-a adopted", func() (bool, error) {
		cm := suite.ConfigMaps(t, ns)["p-a"]
		return framework.OwnedBy(&cm, parent) && cm.UID == orphan.UID && cm.Data["color"] == "blue", nil
	})
	waitEvent(t, ns, "p", "ChildAdopted")
	waitEvent(t, ns, "p", "ErrResourceExists")
	if cm := suite.ConfigMaps(t, ns)["p-b"]; cm.Data["color"] != "theirs" || framework.OwnedBy(&cm, parent) {
		t.Errorf("a child controlled by another owner was touched: %v %v", cm.Data, cm.OwnerReferences)
	}

	// A child whose labels stop matching is released, not deleted (and,
	// as the hook still wants it, taken back as it is).
	patch := []byte(`{"metadata":{"labels":{"app":null}}}`)
	if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "p-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "p", "ChildReleased")
	suite.Eventually(t, "p-a taken back with the same uid", func() (bool, error) {
		cm, ok := suite.ConfigMaps(t, ns)["p-a"]
		return ok && cm.UID == orphan.UID && framework.OwnedBy(&cm, parent) && cm.Labels["app"] == "p", nil
	})
}

func TestFinalizeHookRunsUntilFinalizedThenChildrenAreCollected(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-finalize")
	ctx := context.Background()
	framework.HelloController{Name: "loop-finalize", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithFinalize(framework.HookAt(hook.URL+"/finalize", 0))
	}}.Create(t, suite)
	suite.CreateHello(t, ns, "p", "loop-finalize", framework.HelloSpec("blue", "a"))
	suite.WaitConfigMaps(t, ns, "p-a")
	suite.Eventually(t, "the finalizer on the parent", func() (bool, error) {
		for _, f := range suite.GetHello(t, ns, "p").GetFinalizers() {
			if f == "metacontroller.io/compositecontroller-loop-finalize" {
				return true, nil
			}
		}
		return false, nil
	})

	if err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "the parent gone", func() (bool, error) {
		_, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	calls, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	if calls["/finalize"] < 2 {
		t.Errorf("finalize hook called %d times; it answers finalized only on its second call", calls["/finalize"])
	}
	// The garbage collector removes the children through their ownerReferences.
	suite.WaitConfigMaps(t, ns)
}

// TestHookFailuresChangeNothingAndRecover breaks the hook in each way in
// turn, each on a parent of its own: a parent's Warning Events are rate
// limited by client-go's recorder (a burst of 25, then one every five
// minutes), so a parent that already failed many times would get no Event
// for a later failure, and "some SyncError" would be true anyway.
func TestHookFailuresChangeNothingAndRecover(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-failures")
	ctx := context.Background()
	framework.HelloController{Name: "loop-failures", HookURL: hook.URL, Method: "InPlace"}.Create(t, suite)

	for _, tc := range []struct{ mode, message string }{
		{"timeout", "timed out after 3s"},
		{"error500", "HTTP 500"},
		{"garbage", "can't decode response"},
		{"undeclared", "not one of the controller's childResources"},
		{"othernamespace", "is in namespace kube-system"},
	} {
		mode := tc.mode
		t.Run(mode, func(t *testing.T) {
			p := "p-" + mode
			parent := suite.CreateHello(t, ns, p, "loop-failures", framework.HelloSpec("blue", "a", "b"))
			suite.WaitObserved(t, ns, p, parent.GetGeneration())
			own := func() map[string]corev1.ConfigMap {
				out := map[string]corev1.ConfigMap{}
				for name, cm := range suite.ConfigMaps(t, ns) {
					if strings.HasPrefix(name, p+"-") {
						out[name] = cm
					}
				}
				return out
			}
			before := own()
			if framework.Names(before) != p+"-a,"+p+"-b" {
				t.Fatalf("children before breaking the hook: %s", framework.Names(before))
			}

			if err := hook.SetMode(mode); err != nil {
				t.Fatal(err)
			}
			// Every call counted from here on is answered in this mode.
			key := "/sync " + ns + "/" + p
			callsBefore := calls(t, hook, key)
			// A change the broken hook would have to act on: drop b.
			generation := suite.SetHelloSpec(t, ns, p, framework.HelloSpec("red", "a"))
			suite.Eventually(t, "a call of the hook in mode "+mode+" for "+p, func() (bool, error) {
				now, err := hook.Calls()
				return err == nil && now[key] > callsBefore, err
			})
			// This case's own failure, reported on the parent and the
			// controller.
			suite.WaitForEvent(t, ns, p, "SyncError", tc.message, time.Minute)
			suite.Eventually(t, "lastSyncError on the CompositeController saying "+tc.message, func() (bool, error) {
				c, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, "loop-failures", metav1.GetOptions{})
				return err == nil && strings.Contains(c.Status.LastSyncError, tc.message), err
			})
			// Nothing was deleted or changed, here or in kube-system.
			after := own()
			if framework.Names(after) != framework.Names(before) {
				t.Errorf("with the hook %s, ConfigMaps went from %s to %s", mode, framework.Names(before), framework.Names(after))
			}
			for name, cm := range after {
				if cm.Data["color"] != "blue" || cm.UID != before[name].UID {
					t.Errorf("with the hook %s, %s changed: %v", mode, name, cm.Data)
				}
			}
			if _, err := suite.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, p+"-elsewhere", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a child in another namespace was created: %v", err)
			}
			if _, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, p+"-sneaky", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a child of an undeclared type was created: %v", err)
			}

			// Fixed, it recovers by itself.
			if err := hook.SetMode("ok"); err != nil {
				t.Fatal(err)
			}
			suite.WaitObserved(t, ns, p, generation)
			suite.Eventually(t, p+"-a red and "+p+"-b gone", func() (bool, error) {
				cms := own()
				return framework.Names(cms) == p+"-a" && cms[p+"-a"].Data["color"] == "red", nil
			})
		})
	}
}

func TestControllerDefinitionChangesTakeEffect(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-definition")
	ctx := context.Background()
	// Only ConfigMaps at first.
	ctrl := framework.HelloController{Name: "loop-definition", HookURL: hook.URL}
	onlyConfigMaps := ctrl
	onlyConfigMaps.Spec = func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.ChildResources = s.ChildResources[:1] // the ConfigMaps, without the Services after them
	}
	only := onlyConfigMaps.Manifest()
	suite.ApplyController(t, ctrl.Name, only)
	s := framework.HelloSpec("blue", "a")
	s["service"] = true
	suite.CreateHello(t, ns, "p", ctrl.Name, s)
	// The hook returns a Service the controller does not declare: an
	// invalid answer, nothing applied.
	waitEvent(t, ns, "p", "not one of the controller's childResources")
	if _, err := suite.Kube.CoreV1().Services(ns).Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Service was created before it was declared: %v", err)
	}

	// Edited to declare Services: the loop picks it up.
	ctrl.Create(t, suite)
	suite.Eventually(t, "Service p", func() (bool, error) {
		_, err := suite.Kube.CoreV1().Services(ns).Get(ctx, "p", metav1.GetOptions{})
		return err == nil, nil
	})
	suite.WaitConfigMaps(t, ns, "p-a")

	// Deleted: its loop stops; a new parent gets nothing.
	uid := ccUID(t, ctrl.Name)
	stopped := eventsOf(t, metav1.NamespaceDefault, uid, "Stopped", "Stopped controller: "+ctrl.Name)
	if err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(ctx, ctrl.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "the CompositeController gone", func() (bool, error) {
		_, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// Gone from the API is not yet stopped: the server stops the loop when
	// its informer sees the delete, and says so with a Stopped Event (one
	// more than the edit above left), recorded once the loop has stopped.
	suite.Eventually(t, "a fresh Stopped Event of the deleted controller", func() (bool, error) {
		return eventsOf(t, metav1.NamespaceDefault, uid, "Stopped", "Stopped controller: "+ctrl.Name) > stopped, nil
	})
	before, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	suite.CreateHello(t, ns, "q", ctrl.Name, framework.HelloSpec("blue", "z"))
	// The absence of an effect needs a fresh signal that the loop is alive
	// and past q: another controller's parent, created after q, synced
	// through the same hellos informer and the same hook.
	other := framework.HelloController{Name: "loop-definition-2", HookURL: hook.URL}
	other.Create(t, suite)
	r := suite.CreateHello(t, ns, "r", other.Name, framework.HelloSpec("blue", "y"))
	suite.WaitObserved(t, ns, "r", r.GetGeneration())
	after, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	if after["/sync "+ns+"/r"] == 0 {
		t.Fatalf("the other controller's parent r was never synced: %v", after)
	}
	for _, parent := range []string{"p", "q"} {
		key := "/sync " + ns + "/" + parent
		if after[key] != before[key] {
			t.Errorf("the deleted controller still called its hook for %s (%d -> %d calls)", parent, before[key], after[key])
		}
	}
	if _, ok := suite.ConfigMaps(t, ns)["q-z"]; ok {
		t.Errorf("a deleted controller still created children")
	}
	if got := suite.GetHello(t, ns, "q").Object["status"]; got != nil {
		t.Errorf("a deleted controller wrote q's status: %v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestCustomizeHookRelatedObjectsAreSentAndWatched(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-related")
	ctx := context.Background()
	framework.HelloController{Name: "loop-related", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 0))
	}}.Create(t, suite)
	s := framework.HelloSpec("blue", "a")
	s["related"] = map[string]interface{}{"apiVersion": "v1", "resource": "secrets", "labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"related-to": "p"}}}
	suite.CreateHello(t, ns, "p", "loop-related", s)
	suite.WaitConfigMaps(t, ns, "p-a")
	related := func() int64 {
		n, _, _ := unstructured.NestedInt64(suite.GetHello(t, ns, "p").Object, "status", "relatedObjects")
		return n
	}
	if n := related(); n != 0 {
		t.Fatalf("relatedObjects = %d before any related Secret exists", n)
	}
	// A new related object resyncs the parent: the hook sees it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns, Labels: map[string]string{"related-to": "p"}}}
	if _, err := suite.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "the hook to see the related Secret", func() (bool, error) { return related() == 1, nil })
}

// TestThrottlingHookIsCalledAgainAfterRetryAfter: a hook answering 429
// changes nothing and is called again after its Retry-After, not with a
// failure's backoff.
func TestThrottlingHookIsCalledAgainAfterRetryAfter(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-throttle")
	framework.HelloController{Name: "loop-throttle", HookURL: hook.URL}.Create(t, suite)
	parent := suite.CreateHello(t, ns, "p", "loop-throttle", framework.HelloSpec("blue", "a"))
	suite.WaitObserved(t, ns, "p", parent.GetGeneration())
	before := suite.WaitConfigMaps(t, ns, "p-a")

	// The last sync's own status write and children resync the parent once
	// more; let that settle, so that every call below is the spec change's
	// or a retry's.
	key := "/sync " + ns + "/p"
	suite.Eventually(t, "no call of the hook for a second", func() (bool, error) {
		times, err := hook.Times()
		if err != nil {
			return false, err
		}
		calls := times[key]
		return len(calls) > 0 && float64(time.Now().UnixNano())/1e9-calls[len(calls)-1] > 1, nil
	})
	if err := hook.SetMode("throttle"); err != nil {
		t.Fatal(err)
	}
	// Every call counted from here on is answered 429 with Retry-After: 1.
	times, err := hook.Times()
	if err != nil {
		t.Fatal(err)
	}
	first := len(times[key])
	generation := suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green"))
	waitEvent(t, ns, "p", "HookThrottled")
	// Called again and again, each time after the Retry-After second: a
	// failure's backoff would call again within milliseconds.
	var throttled []float64
	suite.Eventually(t, "four calls of the throttling hook", func() (bool, error) {
		now, err := hook.Times()
		if err != nil {
			return false, err
		}
		throttled = now[key][first:]
		return len(throttled) >= 4, nil
	})
	var offsets []string
	for _, at := range throttled {
		offsets = append(offsets, fmt.Sprintf("+%.3fs", at-throttled[0]))
	}
	for i := 1; i < len(throttled); i++ {
		if gap := throttled[i] - throttled[i-1]; gap < 0.9 {
			t.Errorf("throttled call %d came %.3fs after the one before; Retry-After asked for 1s (calls at %s)", i+1, gap, strings.Join(offsets, " "))
		}
	}
	if after := suite.ConfigMaps(t, ns); framework.Names(after) != framework.Names(before) {
		t.Errorf("while throttled, ConfigMaps went from %s to %s", framework.Names(before), framework.Names(after))
	}
	if err := hook.SetMode("ok"); err != nil {
		t.Fatal(err)
	}
	suite.WaitObserved(t, ns, "p", generation)
	suite.WaitConfigMaps(t, ns)
}
