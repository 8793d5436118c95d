package standalone

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// syncAnswer is a SyncRequest as the tests read it.
type syncAnswer struct {
	Kind   string `json:"kind"`
	Status struct {
		DryRun       bool                     `json:"dryRun"`
		ParentStatus map[string]interface{}   `json:"parentStatus"`
		Children     []map[string]interface{} `json:"children"`
		Plan         []struct {
			Action, Kind, Namespace, Name, Reason string
			Diff                                  []string
		} `json:"plan"`
		HookRequest struct {
			Parent   map[string]interface{}                       `json:"parent"`
			Children map[string]map[string]map[string]interface{} `json:"children"`
		} `json:"hookRequest"`
		Warnings []string `json:"warnings"`
	} `json:"status"`
}

func startHook(t *testing.T) *framework.PythonHook {
	t.Helper()
	hook, err := framework.StartPythonHook(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(hook.LogFile)
			t.Logf("hook log:\n%s", data)
		}
		hook.Stop()
	})
	return hook
}

func createSyncController(t *testing.T, s *server, name, hookURL string) {
	t.Helper()
	s.mustKubectl(t, "create", "-f", writeManifest(t, syncControllerManifest(name, hookURL, "        timeout: 5s\n")))
}

// syncControllerManifest is a CompositeController named name of the
// hellos, with ConfigMap (updated in place) and Service children, whose
// sync hook is hookURL/sync; tail follows the hook's url: YAML lines
// indented as the webhook's fields, or as the hooks'.
func syncControllerManifest(name, hookURL, tail string) string {
	return ccHead(name) + fmt.Sprintf(`  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook:
        url: %s/sync
`, hookURL) + tail
}

// startSyncController is a shared server with a controller named after
// base (createSyncController) whose sync hook is one of the test's own.
func startSyncController(t *testing.T, base string) (*server, *framework.PythonHook, string) {
	t.Helper()
	s := sharedServer(t)
	hook := startHook(t)
	name := uniqueName(base)
	createSyncController(t, s, name, hook.URL)
	return s, hook, name
}

// inlineSyncRequest previews parent p1 with one up-to-date-but-for-color
// child and one the hook no longer returns.
const inlineSyncRequest = `{
  "apiVersion": "metacontroller.k8s.io/v1alpha1",
  "kind": "SyncRequest",
  "spec": {
    "parent": {
      "apiVersion": "example.com/v1", "kind": "Hello",
      "metadata": {"name": "p1", "namespace": "default", "uid": "11111111-2222-3333-4444-555555555555"},
      "spec": {"color": "blue", "configMaps": ["a", "b"], "service": true}
    },
    "children": {
      "ConfigMap.v1": {
        "p1-a":   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p1-a", "namespace": "default", "labels": {"app": "p1"}}, "data": {"color": "red", "item": "a"}},
        "p1-old": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p1-old", "namespace": "default"}, "data": {}}
      }
    }
  }
}`

func TestDryRunSyncOfInlineParentShowsChildrenAndPlan(t *testing.T) {
	t.Parallel()
	s, _, name := startSyncController(t, "sync-inline")

	// What a hook author types.
	out := s.mustKubectl(t, "create", "--raw", ccPath(name)+"/sync?dryRun=All", "-f", writeManifest(t, inlineSyncRequest))
	var answer syncAnswer
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, out)
	}
	if answer.Kind != "SyncRequest" || !answer.Status.DryRun {
		t.Errorf("kind %q dryRun %v, want SyncRequest true", answer.Kind, answer.Status.DryRun)
	}
	// Nothing of a SyncRequest is stored, so nobody manages its fields.
	var meta struct {
		Metadata map[string]interface{} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &meta); err != nil || meta.Metadata["managedFields"] != nil {
		t.Errorf("answer's metadata has managedFields: %v (%v)", meta.Metadata["managedFields"], err)
	}
	if answer.Status.ParentStatus["color"] != "blue" || answer.Status.ParentStatus["observedChildren"] != float64(2) {
		t.Errorf("parentStatus = %v, want the hook's {color: blue, observedChildren: 2}", answer.Status.ParentStatus)
	}
	if len(answer.Status.Children) != 3 {
		t.Errorf("children = %d, want 3 (two ConfigMaps and a Service)", len(answer.Status.Children))
	}
	plan := map[string]string{}
	for _, item := range answer.Status.Plan {
		plan[item.Kind+"/"+item.Name] = item.Action
		if item.Name == "p1-a" && !strings.Contains(strings.Join(item.Diff, "\n"), "data.color") {
			t.Errorf("update of p1-a: diff %q does not name data.color", item.Diff)
		}
	}
	want := map[string]string{"ConfigMap/p1-a": "Update", "ConfigMap/p1-b": "Create", "Service/p1": "Create", "ConfigMap/p1-old": "Delete"}
	for k, v := range want {
		if plan[k] != v {
			t.Errorf("plan for %s = %q, want %q (whole plan %v)", k, plan[k], v, plan)
		}
	}
	// The exact request the hook got is in the answer, usable as a fixture.
	if _, ok := answer.Status.HookRequest.Children["ConfigMap.v1"]["p1-a"]; !ok {
		t.Errorf("hookRequest.children lacks ConfigMap.v1/p1-a: %v", answer.Status.HookRequest.Children)
	}
	if answer.Status.HookRequest.Parent["metadata"].(map[string]interface{})["name"] != "p1" {
		t.Errorf("hookRequest.parent is not p1: %v", answer.Status.HookRequest.Parent)
	}
}

// TestDryRunSyncShowsWhatAnApplyWouldStore previews an update of a child
// our field manager applied before (inline, with its managedFields) and a
// create: the children are merged as kube-apiserver's server-side apply
// would merge them, with no cluster at all.
func TestDryRunSyncShowsWhatAnApplyWouldStore(t *testing.T) {
	t.Parallel()
	s, _, name := startSyncController(t, "sync-store")
	manager := "metacontroller.k8s.io/" + name
	const parentUID = "11111111-2222-3333-4444-555555555555"
	// p1-a was applied by us with data.stale, which the hook no longer
	// returns; data.note is someone else's.
	request := fmt.Sprintf(`{
  "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "SyncRequest",
  "spec": {
    "parent": {"apiVersion": "example.com/v1", "kind": "Hello",
      "metadata": {"name": "p1", "namespace": "default", "uid": %[2]q},
      "spec": {"color": "blue", "configMaps": ["a", "b"]}},
    "children": {"ConfigMap.v1": {"p1-a": {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "p1-a", "namespace": "default", "labels": {"app": "p1"},
        "managedFields": [
          {"manager": %[1]q, "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
           "fieldsV1": {"f:data": {"f:color": {}, "f:item": {}, "f:stale": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}},
          {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
           "fieldsV1": {"f:data": {"f:note": {}}}}]},
      "data": {"color": "red", "item": "a", "stale": "x", "note": "kept"}}}}
  }
}`, manager, parentUID)
	r := newAPIClient(t, s.kubeconfig).dryRunSync(t, name, request)
	if r.code != http.StatusCreated && r.code != http.StatusOK {
		t.Fatalf("dry-run: HTTP %d: %s", r.code, r.body)
	}
	var answer syncAnswer
	if err := json.Unmarshal(r.body, &answer); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, r.body)
	}
	children := map[string]map[string]interface{}{}
	for _, child := range answer.Status.Children {
		meta, _ := child["metadata"].(map[string]interface{})
		children[fmt.Sprint(meta["name"])] = child
	}
	if len(children) != 2 {
		t.Fatalf("children %v, want p1-a and p1-b", children)
	}
	for childName, want := range map[string]map[string]interface{}{
		// stale pruned, color updated, note left to its owner.
		"p1-a": {"color": "blue", "item": "a", "note": "kept"},
		"p1-b": {"color": "blue", "item": "b"},
	} {
		child := children[childName]
		if !reflect.DeepEqual(child["data"], want) {
			t.Errorf("%s: data %v, want %v", childName, child["data"], want)
		}
		meta, _ := child["metadata"].(map[string]interface{})
		if refs := fmt.Sprint(meta["ownerReferences"]); !strings.Contains(refs, parentUID) {
			t.Errorf("%s: ownerReferences %s, want the parent's", childName, refs)
		}
		if managers := fmt.Sprint(meta["managedFields"]); !strings.Contains(managers, manager) || !strings.Contains(managers, "Apply") {
			t.Errorf("%s: managedFields %s, want an Apply entry of %s", childName, managers, manager)
		}
	}
	for _, item := range answer.Status.Plan {
		if item.Name == "p1-a" && (item.Action != "Update" || !strings.Contains(strings.Join(item.Diff, "\n"), `- data.stale: "x"`)) {
			t.Errorf("plan for p1-a: %s %q, want an Update removing data.stale", item.Action, item.Diff)
		}
	}
}

func TestServerDryRunNeedsACluster(t *testing.T) {
	t.Parallel()
	s, _, name := startSyncController(t, "sync-serverdryrun")
	body := strings.Replace(inlineSyncRequest, `"spec": {`, `"spec": {"serverDryRun": true,`, 1)
	r := newAPIClient(t, s.kubeconfig).dryRunSync(t, name, body)
	if r.code != http.StatusBadRequest {
		t.Fatalf("serverDryRun in standalone mode: HTTP %d, want 400: %s", r.code, r.body)
	}
	if st := r.status(t); !strings.Contains(st.Message, "serverDryRun") || !strings.Contains(st.Message, "standalone") {
		t.Errorf("message %q should name serverDryRun and standalone mode", st.Message)
	}
}

func TestSyncWithoutDryRunIsRefusedClearly(t *testing.T) {
	t.Parallel()
	s, _, name := startSyncController(t, "sync-nodryrun")
	c := newAPIClient(t, s.kubeconfig)
	r := c.do(t, http.MethodPost, ccPath(name)+"/sync", c.token, "application/json", []byte(inlineSyncRequest))
	if r.code < 400 || r.code >= 500 {
		t.Fatalf("sync without dryRun in standalone mode: HTTP %d, want a 4xx: %s", r.code, r.body)
	}
	if st := r.status(t); !strings.Contains(st.Message, "dryRun") {
		t.Errorf("message %q does not point at dryRun", st.Message)
	}
}

func TestSyncRequestErrorsAreClear(t *testing.T) {
	t.Parallel()
	s, _, name := startSyncController(t, "sync-errors")
	c := newAPIClient(t, s.kubeconfig)

	for _, tc := range []struct {
		name, path, body, want string
		code                   int
	}{
		{"unknown controller", ccPath("no-such-controller") + "/sync?dryRun=All", inlineSyncRequest, "not found", 404},
		{"no parent", ccPath(name) + "/sync?dryRun=All", `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{}}`, "spec.parentRef", 422},
		{"live parent without a cluster", ccPath(name) + "/sync?dryRun=All", `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":"default","name":"p1"}}}`, "standalone", 400},
		{"parent of another resource", ccPath(name) + "/sync?dryRun=All", `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parent":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}}}`, "apiVersion", 400},
		{"garbage", ccPath(name) + "/sync?dryRun=All", `{not json`, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(t, http.MethodPost, tc.path, c.token, "application/json", []byte(tc.body))
			if r.code != tc.code {
				t.Fatalf("HTTP %d, want %d: %s", r.code, tc.code, r.body)
			}
			if st := r.status(t); !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q lacks %q", st.Message, tc.want)
			}
		})
	}
}

func TestFailingHookGivesAClearError(t *testing.T) {
	t.Parallel()
	s, hook, name := startSyncController(t, "sync-failing")
	reqFile := writeManifest(t, inlineSyncRequest)
	for mode, want := range map[string]string{
		"error500":       "500",
		"garbage":        "invalid",
		"undeclared":     "Secret",
		"othernamespace": "kube-system",
	} {
		if err := hook.SetMode(mode); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := s.kubectl("create", "--raw", ccPath(name)+"/sync?dryRun=All", "-f", reqFile)
		if err == nil {
			t.Errorf("hook mode %s: the dry-run succeeded", mode)
			continue
		}
		if !strings.Contains(stderr, name) || !strings.Contains(stderr, "sync hook") || !strings.Contains(strings.ToLower(stderr), strings.ToLower(want)) {
			t.Errorf("hook mode %s: error %q should name the controller, the sync hook and %q", mode, stderr, want)
		}
	}
}

var etcdURL = regexp.MustCompile(`"Embedded etcd is serving".*url="([^"]+)"`)

// etcdRevision asks the embedded etcd (through its JSON gateway) for its
// current revision: any write anywhere in the store moves it.
func etcdRevision(t *testing.T, s *server) string {
	t.Helper()
	s.out.mu.Lock()
	m := etcdURL.FindStringSubmatch(s.out.all.String())
	s.out.mu.Unlock()
	if m == nil {
		t.Fatal("the server did not log its embedded etcd's URL")
	}
	resp, err := http.Post(m[1]+"/v3/maintenance/status", "application/json", bytes.NewBufferString("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil || status.Header.Revision == "" {
		t.Fatalf("etcd status: %v %+v", err, status)
	}
	return status.Header.Revision
}

func TestThousandDryRunsPersistNothing(t *testing.T) {
	// Its own server: other tests' writes would move the revision.
	s := startServer(t)
	hook := startHook(t)
	const name = "sync-persist-nothing"
	createSyncController(t, s, name, hook.URL)
	c := newAPIClient(t, s.kubeconfig)
	before := s.mustKubectl(t, "get", "cc", name, "-o", "json")
	revision := etcdRevision(t, s)

	for i := 0; i < 1000; i++ {
		r := c.dryRunSync(t, name, inlineSyncRequest)
		if r.code != http.StatusCreated && r.code != http.StatusOK {
			t.Fatalf("dry-run %d: HTTP %d: %s", i, r.code, r.body)
		}
	}

	if after := etcdRevision(t, s); after != revision {
		t.Errorf("etcd revision moved from %s to %s over 1,000 dry-runs", revision, after)
	}
	if after := s.mustKubectl(t, "get", "cc", name, "-o", "json"); after != before {
		t.Errorf("the CompositeController changed over 1,000 dry-runs:\nbefore %s\nafter %s", before, after)
	}
	calls, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	if calls["/sync"] != 1000 {
		t.Errorf("the hook was called %d times, want 1000", calls["/sync"])
	}
}
