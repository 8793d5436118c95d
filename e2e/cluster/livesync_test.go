package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// TestLiveSyncDoesWhatALoopSyncDoes: with the loop off in this package,
// everything that happens is the /sync request's doing, and it is what a
// loop sync does — the finalizer of a controller with a finalize hook, the
// adoption of a matching orphan (re-checked against the live parent), the
// children, and the parent's status.
func TestLiveSyncDoesWhatALoopSyncDoes(t *testing.T) {
	t.Parallel()
	hook := setUpHellos(t)
	ns := "live-sync"
	suite.MustCreateNamespace(t, ns)
	manifest := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: live-sync
spec:
  generateSelector: true
  parentResource: {apiVersion: example.com/v1, resource: hellos}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %[1]s/sync}
    finalize:
      webhook: {url: %[1]s/finalize}
`, hook.URL)
	suite.MustApply(t, manifest)
	dyn, err := dynamic.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	hellos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}
	parent, err := dyn.Resource(hellos).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": ns},
		"spec":     map[string]interface{}{"color": "blue", "configMaps": []interface{}{"a", "b"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An orphan that matches the parent's generated selector: a sync adopts
	// it, keeping its UID.
	orphan, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "p-a", Namespace: ns, Labels: map[string]string{"controller-uid": string(parent.GetUID()), "app": "p"}},
		Data:       map[string]string{"color": "blue", "item": "a"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"p"}}}`, ns)
	file := writeTemp(t, "sync.json", body)
	out, stderr, err := suite.Kubectl(context.Background(), "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync/sync", "-f", file)
	if err != nil {
		t.Fatalf("sync: %v: %s", err, stderr)
	}
	var answer struct {
		Status struct {
			DryRun bool `json:"dryRun"`
			Plan   []struct{ Action, Name, Error string }
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, item := range answer.Status.Plan {
		if item.Error != "" {
			t.Errorf("plan item %+v failed", item)
		}
		actions[item.Action+" "+item.Name] = item.Name
	}
	if answer.Status.DryRun || actions["Adopt p-a"] == "" || actions["Create p-b"] == "" {
		t.Fatalf("answer %+v, want the adoption of p-a and the creation of p-b", answer.Status)
	}

	// Done when the answer came: no waiting.
	got, err := dyn.Resource(hellos).Namespace(ns).Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := got.GetFinalizers(); len(fs) != 1 || fs[0] != "metacontroller.io/compositecontroller-live-sync" {
		t.Errorf("finalizers %v, want the controller's, as a loop sync adds it", fs)
	}
	if g, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); g != got.GetGeneration() {
		t.Errorf("status %v: want observedGeneration %d written", got.Object["status"], got.GetGeneration())
	}
	if c, _, _ := unstructured.NestedString(got.Object, "status", "color"); c != "blue" {
		t.Errorf("status %v: want the hook's color", got.Object["status"])
	}
	adopted, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(adopted); ref == nil || ref.UID != parent.GetUID() || adopted.UID != orphan.UID {
		t.Errorf("p-a: controller %v, uid %s (was %s): want adopted in place", ref, adopted.UID, orphan.UID)
	}
	created, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(created); ref == nil || ref.UID != parent.GetUID() {
		t.Errorf("p-b controller %v", ref)
	}
	// Let the parent go: its finalize hook must not keep a test namespace.
	_ = dyn.Resource(hellos).Namespace(ns).Delete(context.Background(), "p", metav1.DeleteOptions{})
	_, _, _ = suite.Kubectl(context.Background(), "patch", "-n", ns, "hellos.example.com", "p", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
}

// TestLiveSyncNeedsTheCallersOwnRights: a live /sync writes with the
// server's identity, so it also needs the caller's own rights on what it
// would write; without them it is refused, naming each one, and nothing is
// written.
func TestLiveSyncNeedsTheCallersOwnRights(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newLiveSyncCase(t, "live-sync-rights", "a")
	ns := c.ns
	syncer := userWithRules(t, "live-syncer",
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/sync"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"list"}},
	)
	_, stderr, err := suite.KubectlAs(ctx, syncer, nil, "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync-rights/sync", "-f", c.request)
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "create configmaps "+ns+"/p-a") ||
		!strings.Contains(stderr, "patch configmaps "+ns+"/p-a") {
		t.Fatalf("a live sync by a user who may not create the children: err %v\n%s\nwant Forbidden naming create and patch of configmaps %s/p-a", err, stderr, ns)
	}
	if cms, _ := suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); len(cms.Items) > 1 {
		t.Errorf("a refused sync created ConfigMaps: %d in the namespace", len(cms.Items))
	}
	got, err := c.dyn.Resource(hellosGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Object["status"] != nil {
		t.Errorf("a refused sync wrote the status: %v", got.Object["status"])
	}
	// The same request by the admin goes through.
	if _, stderr, err := suite.Kubectl(ctx, "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync-rights/sync", "-f", c.request); err != nil {
		t.Errorf("the admin's live sync: %v\n%s", err, stderr)
	}
}

// TestLiveSyncNeedsTheCallersRightsOnRevisions: a live /sync of a rolling
// parent writes its ControllerRevisions in the server's name too, so the
// caller must be allowed to; without it the sync is refused, naming the
// revision, and nothing is written.
func TestLiveSyncNeedsTheCallersRightsOnRevisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newLiveSyncCaseWith(t, "live-sync-revisions", "RollingInPlace", "a")
	syncer := userWithRules(t, "live-syncer-children",
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/sync"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"list", "create", "patch", "delete"}},
	)
	url := "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync-revisions/sync"
	// The delegating authorizer caches answers for a few seconds: wait for
	// the refusal to be about the revision, not the children.
	var stderr string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		_, stderr, err = suite.KubectlAs(ctx, syncer, nil, "create", "--raw", url, "-f", c.request)
		return err != nil && strings.Contains(stderr, "create controllerrevisions.metacontroller.k8s.io "+c.ns+"/"), nil
	}); err != nil {
		t.Fatalf("a live sync of a rolling parent by a user who may not write its ControllerRevisions: %v\n%s\nwant Forbidden naming the revision", err, stderr)
	}
	if cms, _ := suite.Kube.CoreV1().ConfigMaps(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p"}); len(cms.Items) > 0 {
		t.Errorf("a refused sync created %d ConfigMaps", len(cms.Items))
	}
}

// TestLiveSyncWithABrokenHookIsABadGatewayAndDeletesNothing: children a
// sync made stay when the hook later fails or answers garbage, and the
// caller gets 502 HookFailed naming the controller and the hook.
func TestLiveSyncWithABrokenHookIsABadGatewayAndDeletesNothing(t *testing.T) {
	t.Parallel()
	setUpHellos(t)
	// A hook of its own: it breaks it below, and the package's hook serves
	// the tests running alongside.
	hook := suite.Hook(t)
	ctx := context.Background()
	c := newLiveSyncCaseAt(t, "live-sync-broken", hook.URL, "InPlace", "a", "b")
	ns, file := c.ns, c.request
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sync := func() (string, error) {
		_, stderr, err := suite.Kubectl(ctx, "create", "--raw", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync-broken/sync", "-f", file)
		return stderr, err
	}
	if stderr, err := sync(); err != nil {
		t.Fatalf("the first sync: %v\n%s", err, stderr)
	}
	before, err := suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p"})
	if err != nil || len(before.Items) != 2 {
		t.Fatalf("after the first sync: %v, %d ConfigMaps, want 2", err, len(before.Items))
	}
	for _, mode := range []string{"error500", "garbage", "undeclared"} {
		if err := hook.SetMode(mode); err != nil {
			t.Fatal(err)
		}
		stderr, err := sync()
		// kubectl prints a 502's message; the reason is in the Status.
		if err == nil || !strings.Contains(stderr, `CompositeController \"live-sync-broken\"`) && !strings.Contains(stderr, `CompositeController "live-sync-broken"`) ||
			!strings.Contains(stderr, "sync hook") {
			t.Errorf("%s: a live sync with a broken hook: err %v\n%s\nwant a failure naming the controller and its sync hook", mode, err, stderr)
		}
		after, err := suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p"})
		if err != nil || len(after.Items) != 2 {
			t.Fatalf("%s: %v, %d ConfigMaps after a failed sync, want both kept", mode, err, len(after.Items))
		}
		for _, cm := range after.Items {
			if cm.DeletionTimestamp != nil {
				t.Errorf("%s: %s is being deleted after a failed sync", mode, cm.Name)
			}
		}
	}
	// The status code and reason, as an API client sees them.
	if err := hook.SetMode("error500"); err != nil {
		t.Fatal(err)
	}
	raw, err := suite.Kube.Discovery().RESTClient().Post().AbsPath("/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/live-sync-broken/sync").
		Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Raw()
	var status metav1.Status
	if jerr := json.Unmarshal(raw, &status); err == nil || jerr != nil || status.Code != 502 || status.Reason != "HookFailed" {
		t.Errorf("answer %s, err %v: want 502 HookFailed", raw, err)
	}
}

var hellosGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}

// liveSyncCase is a controller of hellos named name (ConfigMap and Service
// children), a namespace of the same name with a parent p asking for the
// ConfigMaps items, and a file holding a SyncRequest for p.
type liveSyncCase struct {
	ns, request string
	dyn         dynamic.Interface
}

func newLiveSyncCase(t *testing.T, name string, items ...interface{}) liveSyncCase {
	t.Helper()
	return newLiveSyncCaseWith(t, name, "InPlace", items...)
}

// newLiveSyncCaseWith is newLiveSyncCase with the ConfigMaps' update
// method.
func newLiveSyncCaseWith(t *testing.T, name, method string, items ...interface{}) liveSyncCase {
	t.Helper()
	return newLiveSyncCaseAt(t, name, setUpHellos(t).URL, method, items...)
}

// newLiveSyncCaseAt is newLiveSyncCaseWith with the controller's hook at
// hookURL.
func newLiveSyncCaseAt(t *testing.T, name, hookURL, method string, items ...interface{}) liveSyncCase {
	t.Helper()
	setUpHellos(t)
	ctx := context.Background()
	suite.MustCreateNamespace(t, name)
	suite.MustApply(t, helloController(name, hookURL, method))
	dyn, err := dynamic.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(hellosGVR).Namespace(name).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "p", "namespace": name},
		"spec":     map[string]interface{}{"color": "blue", "configMaps": items},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"p"}}}`, name)
	file := writeTemp(t, "sync.json", body)
	return liveSyncCase{ns: name, request: file, dyn: dyn}
}
