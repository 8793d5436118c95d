package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var catsets = schema.GroupVersionResource{Group: "ctl.enisoc.com", Version: "v1", Resource: "catsets"}

// TestEarliestShapeControllerRunsItsHookThroughItsService: the founding
// document's CompositeController applies verbatim on the stack with a
// warning per conversion, reads back in today's shape, and its loop calls
// the sync hook at the Service clientConfig names with the controller as
// stored and the children keyed Pod.v1 and PersistentVolumeClaim.v1.
func TestEarliestShapeControllerRunsItsHookThroughItsService(t *testing.T) {
	// Sequential: restarts the server (restartResolving).
	suite.SetUpHellos(t)
	ctx := context.Background()
	if err := suite.Apply(ctx, framework.CRD{Group: "ctl.enisoc.com", Plural: "catsets", Kind: "CatSet"}.Manifest()+
		serverRights("catsets", "ctl.enisoc.com", []string{"catsets", "catsets/status"}, parentVerbs...)+
		serverRights("catset-children", "", []string{"pods", "persistentvolumeclaims"}, "get", "list", "watch", "create", "update", "patch", "delete")); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := suite.Kubectl(ctx, "wait", "--for=condition=Established", "crd/catsets.ctl.enisoc.com", "--timeout=60s"); err != nil {
		t.Fatalf("CRD catsets not established: %v: %s", err, stderr)
	}

	// The hook listens where catset-controller.metacontroller:80, the
	// Service of the manifest, resolves for the server, as cluster DNS
	// would resolve it.
	hook := startCatsetHook(t)
	restartResolving(t, map[string]string{"catset-controller.metacontroller": hook.addr})

	_, stderr, err := suite.KubectlAs(ctx, suite.AdminKubeconfig, strings.NewReader(framework.EarliestShapeController), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply of the earliest shape: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), "catset-controller", metav1.DeleteOptions{})
	})
	for _, w := range framework.EarliestShapeWarnings {
		if !strings.Contains(stderr, "Warning: "+w.Field+": deprecated") || !strings.Contains(stderr, w.Text) {
			t.Errorf("kubectl apply printed no warning at %s saying %q; stderr:\n%s", w.Field, w.Text, stderr)
		}
	}
	wantSpec := yamlObject(t, framework.EarliestShapeStoredSpec)
	shown, stderr, err := suite.Kubectl(ctx, "get", "cc", "catset-controller", "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, stderr)
	}
	if got := yamlObject(t, shown)["spec"]; !reflect.DeepEqual(got, wantSpec) {
		t.Errorf("kubectl get -o yaml shows spec\n%v\nwant today's shape\n%v", got, wantSpec)
	}
	suite.WaitRunning(t, "catset-controller")
	stored, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, "catset-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ns := suite.Namespace(t, "earliest-shape")
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "ctl.enisoc.com/v1", "kind": "CatSet",
		"metadata": map[string]interface{}{"name": "cats", "namespace": ns},
		// As a CatSet selects its Pods and claims: the manifest does not
		// generate selectors.
		"spec": map[string]interface{}{"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "cats"}}},
	}}
	if _, err := suite.Dynamic.Resource(catsets).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The hook asks for a PersistentVolumeClaim; a call that observes it
	// is a call after the loop created it, made for this parent.
	var req catsetHookRequest
	suite.Eventually(t, "a sync hook call observing the claim cats-data", func() (bool, error) {
		for _, r := range hook.requests() {
			if r.Parent.Metadata.Namespace == ns && r.Children["PersistentVolumeClaim.v1"]["cats-data"] != nil {
				req = r
				return true, nil
			}
		}
		return false, nil
	})

	if keys := sortedKeys(req.Children); !reflect.DeepEqual(keys, []string{"PersistentVolumeClaim.v1", "Pod.v1"}) {
		t.Errorf("the hook request's children are keyed %q, want Pod.v1 and PersistentVolumeClaim.v1", keys)
	}
	if got := req.Controller["spec"]; !reflect.DeepEqual(got, wantSpec) {
		t.Errorf("the hook request's controller has spec\n%v\nwant today's shape\n%v", got, wantSpec)
	}
	if uid := req.Controller["metadata"].(map[string]interface{})["uid"]; uid != string(stored.UID) {
		t.Errorf("the hook request's controller has uid %v, want the stored object's %s", uid, stored.UID)
	}
}

// restartResolving runs the stack's composite-apiserver, for the rest of
// t, resolving hosts (name to address) as cluster DNS would.
func restartResolving(t *testing.T, hosts map[string]string) {
	t.Helper()
	suite.SetCompositeHosts(hosts)
	restarted := false
	defer func() {
		if !restarted {
			suite.SetCompositeHosts(nil)
		}
	}()
	suite.RestartWith(t)
	restarted = true
	// Registered after restartWith's, so run before it: the server is
	// started again with the machine's resolution.
	t.Cleanup(func() { suite.SetCompositeHosts(nil) })
}

// catsetHook is a sync hook, served with the project's hook SDK, that asks
// for one PersistentVolumeClaim per parent and keeps every request it got.
type catsetHook struct {
	// addr is the loopback address it listens on, port 80.
	addr string
	mu   sync.Mutex
	got  []catsetHookRequest
}

// catsetHookRequest is a sync request as it came over the wire: the
// controller as plain JSON, so that a field of any shape shows.
type catsetHookRequest struct {
	Controller map[string]interface{} `json:"controller"`
	Parent     struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	} `json:"parent"`
	Children map[string]map[string]map[string]interface{} `json:"children"`
}

func startCatsetHook(t *testing.T) *catsetHook {
	t.Helper()
	// A Service's port is 80 unless it says otherwise, and the manifest
	// does not: listen on port 80 of a loopback address of our own.
	var l net.Listener
	var err error
	for i := 2; i < 255 && l == nil; i++ {
		l, err = net.Listen("tcp", fmt.Sprintf("127.0.77.%d:80", i))
	}
	if l == nil {
		t.Fatalf("can't listen on port 80 of a loopback address: %v", err)
	}
	h := &catsetHook{addr: l.Addr().(*net.TCPAddr).IP.String()}
	answer := hookapi.SyncHandler(hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		claim := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "PersistentVolumeClaim",
			"metadata": map[string]interface{}{"name": req.Parent.GetName() + "-data", "labels": map[string]interface{}{"app": req.Parent.GetName()}},
			"spec": map[string]interface{}{
				"accessModes": []interface{}{"ReadWriteOnce"},
				"resources":   map[string]interface{}{"requests": map[string]interface{}{"storage": "1Mi"}},
			},
		}}
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{}, Children: []*unstructured.Unstructured{claim}}, nil
	}))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var got catsetHookRequest
		if r.URL.Path == "/sync" && json.Unmarshal(body, &got) == nil {
			h.mu.Lock()
			h.got = append(h.got, got)
			h.mu.Unlock()
		}
		if r.URL.Path != "/sync" {
			http.NotFound(w, r)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		answer.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return h
}

func (h *catsetHook) requests() []catsetHookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]catsetHookRequest(nil), h.got...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func yamlObject(t *testing.T, doc string) map[string]interface{} {
	t.Helper()
	// As JSON, so that numbers are float64 as in a decoded hook request.
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("can't parse YAML: %v\n%s", err, doc)
	}
	var m map[string]interface{}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
