package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// stampHook is a patch hook written with the SDK (hookapi.PatchHandler) and
// served over real HTTP from the test process. For every ConfigMap it
// copies the label "color" (which the inline patch before it set) into
// data.seen, so that a child shows that the patches ran in order. Its mode
// can be switched to break it: error500 (the generator fails, so the
// handler answers 500), timeout (no answer until the caller gives up) and
// rename (a patch renaming the child).
type stampHook struct {
	srv *httptest.Server

	mu    sync.Mutex
	mode  string
	calls map[string]int // per parent, "namespace/name"
}

func startStampHook(t *testing.T) *stampHook {
	t.Helper()
	h := &stampHook{mode: "ok", calls: map[string]int{}}
	patch := hookapi.PatchHandler(hookapi.GeneratorFunc(h.generate))
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.getMode() == "timeout" {
			// Until composite-apiserver gives up (its timeout), so that
			// it sees a timeout and the test no leftover call. The body
			// is read first: only then does net/http notice the caller
			// closing the connection.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		patch.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *stampHook) generate(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
	md := req.Variables.Builtin.Parent.Metadata
	h.mu.Lock()
	h.calls[md.Namespace+"/"+md.Name]++
	mode := h.mode
	h.mu.Unlock()
	if mode == "error500" {
		return nil, errors.New("patch hook broken on purpose")
	}
	resp := &hookapi.GenerateResponse{}
	for _, item := range req.Items {
		if item.Ref.Kind != "ConfigMap" {
			continue
		}
		patch := map[string]interface{}{"data": map[string]interface{}{"seen": item.Object.GetLabels()["color"]}}
		if mode == "rename" {
			patch["metadata"] = map[string]interface{}{"name": item.Ref.Name + "-renamed"}
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return nil, err
		}
		resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: data})
	}
	return resp, nil
}

func (h *stampHook) getMode() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mode
}

// setMode switches the mode; every call counted after it is answered in it.
func (h *stampHook) setMode(mode string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mode = mode
}

func (h *stampHook) callsFor(ns, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[ns+"/"+name]
}

// patchesController is a controller whose sync hook is hook.py and whose
// patches are an inline one (the parent's spec.color as each ConfigMap's
// label "color") and the stamp hook, unless the parent's color is "plain".
func patchesController(name, hookURL, stampURL string) framework.HelloController {
	colorLabel := acv1alpha1.PatchHook().WithName("color-label").WithDefinitions(acv1alpha1.PatchDefinition().
		WithSelector(acv1alpha1.PatchSelector().WithAPIVersion("v1").WithKind("ConfigMap")).
		WithJSONPatches(acv1alpha1.JSONPatch().WithOp(v1alpha1.JSONPatchOpAdd).WithPath("/metadata/labels/color").
			WithValueFrom(acv1alpha1.JSONPatchValue().WithVariable("builtin.parent.spec.color"))))
	stamp := acv1alpha1.PatchHook().WithName("stamp").WithEnabledIf(`builtin.parent.spec.color != "plain"`).
		WithWebhook(acv1alpha1.Webhook().WithURL(stampURL + "/patch").WithTimeout(metav1.Duration{Duration: 2 * time.Second}))
	return framework.HelloController{Name: name, HookURL: hookURL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithPatches(colorLabel, stamp)
	}}
}

// patchedConfigMaps are the parent's ConfigMaps, when all of them are as
// hook.py and both patches make them for color.
func patchedConfigMaps(t *testing.T, ns, parent, color string, stamped bool, items ...string) (map[string]corev1.ConfigMap, error) {
	all := suite.ConfigMaps(t, ns)
	out := map[string]corev1.ConfigMap{}
	for _, item := range items {
		name := parent + "-" + item
		cm, ok := all[name]
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s is missing", name)
		}
		seen, hasSeen := cm.Data["seen"]
		if cm.Labels["color"] != color || cm.Data["color"] != color || hasSeen != stamped || (stamped && seen != color) {
			return nil, fmt.Errorf("ConfigMap %s has labels %v and data %v, not %s patched (stamped: %v)", name, cm.Labels, cm.Data, color, stamped)
		}
		out[name] = cm
	}
	return out, nil
}

func waitPatched(t *testing.T, ns, parent, color string, stamped bool, items ...string) map[string]corev1.ConfigMap {
	t.Helper()
	var got map[string]corev1.ConfigMap
	suite.Eventually(t, fmt.Sprintf("ConfigMaps of %s patched for %s", parent, color), func() (bool, error) {
		var err error
		got, err = patchedConfigMaps(t, ns, parent, color, stamped, items...)
		return err == nil, err
	})
	return got
}

// TestPatchesRunAfterTheSyncHookInOrder: a controller with a sync hook and
// two patches, an inline one and a patch hook, converges to the patched
// children; a change of the parent runs the pipeline again; a disabled patch
// does not run.
func TestPatchesRunAfterTheSyncHookInOrder(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	stamp := startStampHook(t)
	ns := suite.Namespace(t, "loop-patches")
	patchesController("loop-patches", hook.URL, stamp.srv.URL).Create(t, suite)

	parent := suite.CreateHello(t, ns, "p", "loop-patches", framework.HelloSpec("blue", "a", "b"))
	for _, cm := range waitPatched(t, ns, "p", "blue", true, "a", "b") {
		if !framework.OwnedBy(&cm, parent) {
			t.Errorf("ConfigMap %s is not controlled by its parent", cm.Name)
		}
	}
	suite.WaitObserved(t, ns, "p", parent.GetGeneration())

	// A change of the parent: both patches run again, over what the sync
	// hook now answers.
	before := stamp.callsFor(ns, "p")
	generation := suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green", "a", "b", "c"))
	waitPatched(t, ns, "p", "green", true, "a", "b", "c")
	suite.WaitObserved(t, ns, "p", generation)
	if after := stamp.callsFor(ns, "p"); after <= before {
		t.Errorf("the patch hook was not called again for p after its change (%d calls before, %d after)", before, after)
	}

	// enabledIf false: the stamp hook is not called, the inline patch is.
	plain := suite.CreateHello(t, ns, "plain", "loop-patches", framework.HelloSpec("plain", "a"))
	waitPatched(t, ns, "plain", "plain", false, "a")
	suite.WaitObserved(t, ns, "plain", plain.GetGeneration())
	if n := stamp.callsFor(ns, "plain"); n != 0 {
		t.Errorf("the patch hook was called %d times for a parent its enabledIf excludes", n)
	}

	metrics := suite.CompositeGet(t, "/metrics")
	if want := `composite_hook_requests_total{code="200",controller="loop-patches",hook="patch:stamp"}`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestPatchesThatFailChangeNothing breaks the patch hook in each way in turn,
// each on a parent of its own (a parent's Warning Events are rate limited,
// see TestHookFailuresChangeNothingAndRecover): the children stay as they
// were, the parent's Event and the controller's lastSyncError say why, and
// the sync recovers once the hook is fixed.
func TestPatchesThatFailChangeNothing(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	stamp := startStampHook(t)
	ns := suite.Namespace(t, "loop-patch-failures")
	ctx := context.Background()
	patchesController("loop-patch-failures", hook.URL, stamp.srv.URL).Create(t, suite)

	for _, tc := range []struct{ mode, message string }{
		{"error500", "HTTP 500 Internal Server Error: patch hook failed: patch hook broken on purpose"},
		{"timeout", "patch:stamp hook (POST " + stamp.srv.URL + "/patch): timed out after 2s"},
		{"rename", "the patch changes metadata.name"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p := "p-" + tc.mode
			parent := suite.CreateHello(t, ns, p, "loop-patch-failures", framework.HelloSpec("blue", "a", "b"))
			before := waitPatched(t, ns, p, "blue", true, "a", "b")
			suite.WaitObserved(t, ns, p, parent.GetGeneration())

			stamp.setMode(tc.mode)
			callsBefore := stamp.callsFor(ns, p)
			// A change the broken patch would have to act on.
			generation := suite.SetHelloSpec(t, ns, p, framework.HelloSpec("red", "a", "b"))
			if tc.mode != "timeout" {
				// A timed-out call is not counted: the handler never
				// reaches the generator.
				suite.Eventually(t, "a call of the patch hook in mode "+tc.mode+" for "+p, func() (bool, error) {
					return stamp.callsFor(ns, p) > callsBefore, nil
				})
			}
			// This case's own failure, on the parent and the controller.
			suite.WaitForEvent(t, ns, p, "SyncError", tc.message, time.Minute)
			suite.WaitForEvent(t, ns, p, "SyncError", `patch:stamp`, time.Minute)
			suite.Eventually(t, "lastSyncError on the CompositeController saying "+tc.message, func() (bool, error) {
				c, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, "loop-patch-failures", metav1.GetOptions{})
				return err == nil && strings.Contains(c.Status.LastSyncError, tc.message), err
			})
			// Nothing was applied: not the sync hook's new color, not the
			// inline patch's, not a renamed child.
			after, err := patchedConfigMaps(t, ns, p, "blue", true, "a", "b")
			if err != nil {
				t.Errorf("with the patch hook in mode %s: %v", tc.mode, err)
			}
			for name, cm := range after {
				if cm.UID != before[name].UID || cm.ResourceVersion != before[name].ResourceVersion {
					t.Errorf("with the patch hook in mode %s, %s changed (uid %s -> %s, resourceVersion %s -> %s)",
						tc.mode, name, before[name].UID, cm.UID, before[name].ResourceVersion, cm.ResourceVersion)
				}
			}
			for name := range suite.ConfigMaps(t, ns) {
				if strings.HasSuffix(name, "-renamed") {
					t.Errorf("a renamed child %s was created", name)
				}
			}

			// Fixed, it recovers by itself.
			stamp.setMode("ok")
			waitPatched(t, ns, p, "red", true, "a", "b")
			suite.WaitObserved(t, ns, p, generation)
		})
	}
	metrics := suite.CompositeGet(t, "/metrics")
	for _, want := range []string{
		`composite_hook_errors_total{controller="loop-patch-failures",hook="patch:stamp",reason="status"}`,
		`composite_hook_errors_total{controller="loop-patch-failures",hook="patch:stamp",reason="timeout"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
