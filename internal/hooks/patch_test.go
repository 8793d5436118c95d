package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/metrics/testutil"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// patchController has a sync hook, a webhook patch "stamp" at patchURL with
// a bearer token and ETags asked for, and an inline patch "team".
func patchController(syncURL, patchURL string) *v1alpha1.CompositeController {
	return &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "patch-test", Generation: 2},
		Spec: v1alpha1.CompositeControllerSpec{Hooks: &v1alpha1.CompositeControllerHooks{
			Sync: &v1alpha1.Hook{Webhook: urlHook(syncURL)},
			Patches: []v1alpha1.PatchHook{
				{Name: "stamp", Webhook: &v1alpha1.Webhook{
					URL:  &patchURL,
					Etag: &v1alpha1.WebhookEtagConfig{Enabled: ptr(true)},
					Authorization: &v1alpha1.AuthorizationConfig{
						SecretRef: v1alpha1.KeyReference{Namespace: "hooks", Name: "token", Key: "token"},
					},
				}},
				{Name: "team", Definitions: []v1alpha1.PatchDefinition{{
					Selector: v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
					JSONPatches: []v1alpha1.JSONPatch{{Op: v1alpha1.JSONPatchOpAdd, Path: "/data/generation",
						ValueFrom: &v1alpha1.JSONPatchValue{Template: ptr(`"{{ .builtin.controller.generation }}"`)}}},
				}}},
			},
		}},
	}
}

var tokenSecrets = &fakeSecrets{secrets: map[string]map[string][]byte{"hooks/token": {"token": []byte("s3cret")}}}

func patchInput(children ...*unstructured.Unstructured) patches.Input {
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]interface{}{"name": "p", "namespace": "ns"},
	}}
	return patches.Input{Controller: "patch-test", Generation: 2, Parent: parent, Children: children}
}

func configMapChild(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": name, "namespace": "ns"},
	}}
}

func TestBuildCallsPatchHooksLikeOtherHooks(t *testing.T) {
	var (
		mu      sync.Mutex
		headers []http.Header
	)
	stamp := hookapi.PatchHandler(hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			resp.Items = append(resp.Items, hookapi.GenerateResponseItem{
				UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch,
				Patch: json.RawMessage(`{"data":{"stampedBy":"` + req.Variables.Builtin.Controller.Name + `"}}`),
			})
		}
		return resp, nil
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("ETag", `"always-the-same"`)
		stamp.ServeHTTP(w, r)
	}))
	defer srv.Close()

	h, err := Build(context.Background(), definitiontest.Compile(t, patchController(srv.URL+"/sync", srv.URL+"/patch")), tokenSecrets, Destinations{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	steps := h.Patches.Steps()
	if len(steps) != 2 || steps[0].Name != "stamp" || steps[1].Name != "team" {
		t.Fatalf("steps %+v, want stamp and team", steps)
	}
	w, ok := steps[0].Generator.(*Webhook)
	if !ok || !w.Strict() || w.URL() != srv.URL+"/patch" {
		t.Fatalf("stamp's generator %#v, want a strict *Webhook at /patch", steps[0].Generator)
	}

	before := counterValue(t, func() (float64, error) {
		return testutil.GetCounterMetricValue(hookRequests.WithLabelValues("patch-test", "patch:stamp", "200"))
	})
	for i := 0; i < 2; i++ {
		res, err := h.Patches.Run(context.Background(), patchInput(configMapChild("a")))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Children[0].Object["data"]; !equalJSON(got, map[string]interface{}{"stampedBy": "patch-test", "generation": "2"}) {
			t.Errorf("patched data %v", got)
		}
	}
	if len(headers) != 2 {
		t.Fatalf("the patch hook was called %d times, want 2", len(headers))
	}
	for _, hd := range headers {
		if got := hd.Get("Authorization"); got != "Bearer s3cret" {
			t.Errorf("Authorization %q, want the Secret's bearer token", got)
		}
		// etag is ignored for patch hooks.
		if got := hd.Get("If-None-Match"); got != "" {
			t.Errorf("If-None-Match %q sent to a patch hook", got)
		}
	}
	after := counterValue(t, func() (float64, error) {
		return testutil.GetCounterMetricValue(hookRequests.WithLabelValues("patch-test", "patch:stamp", "200"))
	})
	if after-before != 2 {
		t.Errorf("composite_hook_requests_total{hook=patch:stamp,code=200} grew by %v, want 2", after-before)
	}
}

func TestPatchHookFailuresNameThePatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		reason  string
		want    string
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "patch hook on fire", http.StatusInternalServerError)
		},
			ReasonStatus, `patch "stamp": CompositeController "patch-test" patch:stamp hook (POST `},
		{"unknown field, decoded strictly", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"items":[],"extra":true}`)
		}, ReasonDecode, `unknown field "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			h, err := Build(context.Background(), definitiontest.Compile(t, patchController(srv.URL+"/sync", srv.URL+"/patch")), tokenSecrets, Destinations{})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			before := counterValue(t, func() (float64, error) {
				return testutil.GetCounterMetricValue(hookErrors.WithLabelValues("patch-test", "patch:stamp", tc.reason))
			})
			res, err := h.Patches.Run(context.Background(), patchInput(configMapChild("a")))
			var call *CallError
			if res != nil || !errors.As(err, &call) || call.Hook != "patch:stamp" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want a CallError of patch:stamp saying %q", res, err, tc.want)
			}
			after := counterValue(t, func() (float64, error) {
				return testutil.GetCounterMetricValue(hookErrors.WithLabelValues("patch-test", "patch:stamp", tc.reason))
			})
			if after-before != 1 {
				t.Errorf("composite_hook_errors_total{hook=patch:stamp,reason=%s} grew by %v, want 1", tc.reason, after-before)
			}
		})
	}
}

func TestBuildFailsOnAPatchItCanNotConfigure(t *testing.T) {
	cc := patchController("http://127.0.0.1:1/sync", "http://127.0.0.1:1/patch")
	// The token's Secret does not exist.
	_, err := Build(context.Background(), definitiontest.Compile(t, cc), &fakeSecrets{}, Destinations{})
	if err == nil || !strings.Contains(err.Error(), "patch:stamp") {
		t.Errorf("Build = %v, want an error naming patch:stamp", err)
	}
}

func equalJSON(a, b interface{}) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
