package standalone

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// TestDryRunSyncShowsEachPatchStep previews an inline parent, with no
// cluster at all, through a sync hook (hook.py) and three patches: an
// inline one, a patch hook served with the SDK from this test, and one its
// enabledIf switches off. The answer shows what each patch changed in each
// child, one field a line, and the exact request each patch got.
func TestDryRunSyncShowsEachPatchStep(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	hook := startHook(t)
	// The patch hook: data.seen is the label the inline patch set.
	stamp := httptest.NewServer(hookapi.PatchHandler(hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			if item.Ref.Kind == "ConfigMap" {
				resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch,
					Patch: json.RawMessage(fmt.Sprintf(`{"data":{"seen":%q}}`, item.Object.GetLabels()["color"]))})
			}
		}
		return resp, nil
	})))
	defer stamp.Close()

	name := uniqueName("sync-patches")
	manifest := syncControllerManifest(name, hook.URL, fmt.Sprintf(`    patches:
    - name: color-label
      definitions:
      - selector: {apiVersion: v1, kind: ConfigMap}
        jsonPatches:
        - op: add
          path: /metadata/labels/color
          valueFrom: {variable: builtin.parent.spec.color}
        - op: remove
          path: /data/item
    - name: never
      enabledIf: builtin.parent.spec.color == "plain"
      webhook:
        url: http://127.0.0.1:1/never
    - name: stamp
      webhook:
        url: %s/patch
`, stamp.URL))
	s.mustKubectl(t, "create", "-f", writeManifest(t, manifest))
	// kubectl explain documents the new fields from the server's OpenAPI.
	explain := s.mustKubectl(t, "explain", "compositecontrollers.spec.hooks.patches")
	for _, want := range []string{"enabledIf", "definitions", "webhook", "CEL expression"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain of spec.hooks.patches lacks %q:\n%s", want, explain)
		}
	}

	out := s.mustKubectl(t, "create", "--raw", ccPath(name)+"/sync?dryRun=All", "-f", writeManifest(t, inlineSyncRequest))
	var answer struct {
		Status struct {
			Children []map[string]interface{} `json:"children"`
			Plan     []struct {
				Action, Name string
				Diff         []string
			} `json:"plan"`
			Patches []struct {
				Name    string                   `json:"name"`
				Skipped bool                     `json:"skipped"`
				Reason  string                   `json:"reason"`
				Request *hookapi.GenerateRequest `json:"request"`
				Changes []struct {
					Kind, Namespace, Name string
					Diff                  []string
				} `json:"changes"`
			} `json:"patches"`
			Warnings []string `json:"warnings"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, out)
	}
	steps := answer.Status.Patches
	if len(steps) != 3 || steps[0].Name != "color-label" || steps[1].Name != "never" || steps[2].Name != "stamp" {
		t.Fatalf("patches %+v, want color-label, never, stamp", steps)
	}
	label, never, stamped := steps[0], steps[1], steps[2]

	// Per step, per child, one changed field a line.
	changes := map[string][]string{}
	for _, c := range label.Changes {
		changes[c.Namespace+"/"+c.Name] = c.Diff
	}
	wantLabel := map[string][]string{
		"default/p1-a": {`- data.item: "a"`, `metadata.labels.color: <none> -> "blue"`},
		"default/p1-b": {`- data.item: "b"`, `metadata.labels.color: <none> -> "blue"`},
	}
	if !reflect.DeepEqual(changes, wantLabel) {
		t.Errorf("color-label changes %q, want %q", changes, wantLabel)
	}
	if !never.Skipped || never.Request != nil || !strings.Contains(never.Reason, "enabledIf is false") {
		t.Errorf("never: %+v, want skipped by its enabledIf", never)
	}
	if len(stamped.Changes) != 2 || !reflect.DeepEqual(stamped.Changes[0].Diff, []string{`data.seen: <none> -> "blue"`}) {
		t.Errorf("stamp changes %+v, want data.seen on both ConfigMaps", stamped.Changes)
	}

	// The exact request the patch hook got: a fixture of it. The
	// Service is in it too; it sees the inline patch's labels.
	req := stamped.Request
	if req == nil || len(req.Items) != 3 || req.Variables.Builtin.Parent.Metadata.Name != "p1" || req.Variables.Builtin.Controller.Name != name {
		t.Fatalf("stamp's request %+v", req)
	}
	for _, item := range req.Items {
		if item.Ref.Kind == "ConfigMap" && item.Object.GetLabels()["color"] != "blue" {
			t.Errorf("stamp's request has %s without the inline patch's label: %v", item.Ref.Name, item.Object.Object)
		}
		if item.UID == "" || item.Variables.Builtin.Child == nil || *item.Variables.Builtin.Child != item.Ref {
			t.Errorf("item %+v lacks a uid or builtin.child", item)
		}
	}

	// The children and the plan are the patched ones.
	for _, child := range answer.Status.Children {
		meta := child["metadata"].(map[string]interface{})
		if meta["name"] == "p1-b" {
			if data := child["data"].(map[string]interface{}); data["seen"] != "blue" || data["item"] != nil {
				t.Errorf("previewed p1-b data %v, want the patches' data", data)
			}
		}
	}
	for _, item := range answer.Status.Plan {
		if item.Name == "p1-a" && !strings.Contains(strings.Join(item.Diff, "\n"), `data.seen: <none> -> "blue"`) {
			t.Errorf("plan for p1-a %s %q does not show the patched field", item.Action, item.Diff)
		}
	}
}

// TestDryRunSyncOfAFailingPatchSaysWhich: a patch hook that renames a
// child fails the preview with the patch and the child named.
func TestDryRunSyncOfAFailingPatchSaysWhich(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	hook := startHook(t)
	rename := httptest.NewServer(hookapi.PatchHandler(hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		return &hookapi.GenerateResponse{Items: []hookapi.GenerateResponseItem{{UID: req.Items[0].UID, PatchType: hookapi.PatchTypeJSONPatch,
			Patch: json.RawMessage(`[{"op":"replace","path":"/metadata/name","value":"elsewhere"}]`)}}}, nil
	})))
	defer rename.Close()
	name := uniqueName("sync-patch-rename")
	manifest := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":%q},
"spec":{"parentResource":{"apiVersion":"example.com/v1","resource":"hellos"},
"childResources":[{"apiVersion":"v1","resource":"configmaps"},{"apiVersion":"v1","resource":"services"}],
"hooks":{"sync":{"webhook":{"url":%q}},"patches":[{"name":"rename","webhook":{"url":%q}}]}}}`, name, hook.URL+"/sync", rename.URL)
	s.mustKubectl(t, "create", "-f", writeManifest(t, manifest))
	r := newAPIClient(t, s.kubeconfig).dryRunSync(t, name, inlineSyncRequest)
	if r.code != http.StatusBadGateway {
		t.Fatalf("HTTP %d, want 502: %s", r.code, r.body)
	}
	st := r.status(t)
	for _, want := range []string{name, `patch:rename`, "ConfigMap.v1 default/p1-a", "may not change a child's apiVersion, kind, name or namespace"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q lacks %q", st.Message, want)
		}
	}
}
