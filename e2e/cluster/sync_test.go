package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

var hook *framework.PythonHook

// setUpHellos installs the parent CRD, the controller's rights and the
// Python hook, once for the package.
func setUpHellos(t *testing.T) *framework.PythonHook {
	t.Helper()
	helloOnce.Do(func() {
		if helloErr = suite.InstallHellos(context.Background()); helloErr != nil {
			return
		}
		hook, helloErr = framework.StartPythonHook(suite.Dir)
	})
	if helloErr != nil {
		t.Fatal(helloErr)
	}
	return hook
}

func helloController(name, hookURL, method string) string {
	return framework.HelloController{Name: name, HookURL: hookURL, Method: method, SelectAll: true, Timeout: "5s"}.Manifest()
}

// inPlaceHelloController sets the suite and the Hello fixtures up, creates
// the namespace ns and applies controller, a Hello controller of the
// package's hook that updates its children in place: where the tests of
// a preview start.
func inPlaceHelloController(t *testing.T, controller, ns string) *framework.PythonHook {
	t.Helper()
	suite.SetUp(t)
	hook := setUpHellos(t)
	suite.MustCreateNamespace(t, ns)
	suite.MustApply(t, helloController(controller, hook.URL, "InPlace"))
	return hook
}

type syncAnswer struct {
	Status struct {
		Children []map[string]interface{} `json:"children"`
		Plan     []struct {
			Action, Kind, Name, Reason string
			Diff                       []string
		} `json:"plan"`
		Warnings []string `json:"warnings"`
	} `json:"status"`
}

// dryRunSync previews the sync of a live parent as kubeconfig's user, the
// children computed by composite-apiserver.
func dryRunSync(t *testing.T, kubeconfig, controller, namespace, parent string) (syncAnswer, string, error) {
	t.Helper()
	return previewSync(t, kubeconfig, controller, namespace, parent, false)
}

// previewSync previews the sync of a live parent; with serverDryRun the
// children are dry-run applied by kube-apiserver.
func previewSync(t *testing.T, kubeconfig, controller, namespace, parent string, serverDryRun bool) (syncAnswer, string, error) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":%q},"serverDryRun":%v}}`, namespace, parent, serverDryRun)
	f, err := os.CreateTemp(t.TempDir(), "sync-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, stderr, err := suite.KubectlAs(context.Background(), kubeconfig, nil, "create", "--raw",
		"/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/"+controller+"/sync?dryRun=All", "-f", f.Name())
	var answer syncAnswer
	if err == nil {
		if jerr := json.Unmarshal([]byte(out), &answer); jerr != nil {
			t.Fatalf("answer is not JSON: %v\n%s", jerr, out)
		}
	}
	return answer, stderr, err
}

func TestDryRunSyncOfLiveParentShowsCreatesAndPersistsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const controller, ns = "sync-live", "sync-live"
	inPlaceHelloController(t, controller, ns)
	parent := helloParent(ns, "p1", "blue", "a", "b")
	suite.MustApply(t, parent)

	// serverDryRun: kube-apiserver dry-run applies each child.
	answer, stderr, err := previewSync(t, suite.AdminKubeconfig, controller, ns, "p1", true)
	if err != nil {
		t.Fatalf("dry-run sync: %v: %s", err, stderr)
	}
	actions := map[string]string{}
	for _, item := range answer.Status.Plan {
		actions[item.Kind+"/"+item.Name] = item.Action
	}
	if actions["ConfigMap/p1-a"] != "Create" || actions["ConfigMap/p1-b"] != "Create" || len(actions) != 2 {
		t.Errorf("plan = %v, want Create of ConfigMaps p1-a and p1-b", actions)
	}
	// The children are as kube-apiserver stored them in its dry run: with
	// a uid and our field manager, owned by the parent.
	if len(answer.Status.Children) != 2 {
		t.Fatalf("children = %d, want 2", len(answer.Status.Children))
	}
	for _, child := range answer.Status.Children {
		meta := child["metadata"].(map[string]interface{})
		if meta["uid"] == nil || meta["creationTimestamp"] == nil {
			t.Errorf("child %v does not look stored by kube-apiserver (no uid/creationTimestamp)", meta["name"])
		}
		managers := fmt.Sprint(meta["managedFields"])
		if !strings.Contains(managers, "metacontroller.k8s.io/"+controller) {
			t.Errorf("child %v is not managed by metacontroller.k8s.io/%s: %s", meta["name"], controller, managers)
		}
		if refs := fmt.Sprint(meta["ownerReferences"]); !strings.Contains(refs, "p1") {
			t.Errorf("child %v is not owned by p1: %s", meta["name"], refs)
		}
	}
	// Nothing exists in the cluster.
	cms, err := suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=p1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("the dry-run created %d ConfigMaps", len(cms.Items))
	}
}

func TestDryRunSyncPlansUpdatesUnchangedAndDeletesOfExistingChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const controller, ns = "sync-existing", "sync-existing"
	inPlaceHelloController(t, controller, ns)
	parent := helloParent(ns, "p2", "green", "same", "changed")
	suite.MustApply(t, parent)
	p2, err := suite.Kube.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/namespaces", ns, "hellos", "p2").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parentMeta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(p2, &parentMeta); err != nil {
		t.Fatal(err)
	}
	// Children as the controller would have made them: owned by p2 and
	// labelled with its generated selector.
	owned := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: ns,
				Labels: map[string]string{"app": "p2", "controller-uid": string(parentMeta.Metadata.UID)},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "example.com/v1", Kind: "Hello", Name: "p2", UID: parentMeta.Metadata.UID,
					Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
				}},
			},
			Data: data,
		}
	}
	for _, cm := range []*corev1.ConfigMap{
		owned("p2-same", map[string]string{"color": "green", "item": "same"}),
		// stale is ours and the hook no longer returns it.
		owned("p2-changed", map[string]string{"color": "red", "item": "changed", "stale": "x"}),
		owned("p2-stale", map[string]string{"color": "green"}),
	} {
		// Written as the controller writes them: server-side applied under
		// its field manager, which then owns exactly these fields.
		cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		data, err := json.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "metacontroller.k8s.io/" + controller, Force: ptrTo(true)}); err != nil {
			t.Fatal(err)
		}
	}

	answer, stderr, err := dryRunSync(t, suite.AdminKubeconfig, controller, ns, "p2")
	if err != nil {
		t.Fatalf("dry-run sync: %v: %s", err, stderr)
	}
	actions := map[string]string{}
	for _, item := range answer.Status.Plan {
		actions[item.Name] = item.Action
		if item.Name == "p2-changed" && !strings.Contains(strings.Join(item.Diff, "\n"), "data.color") {
			t.Errorf("the diff of p2-changed %q does not name data.color", item.Diff)
		}
	}
	want := map[string]string{"p2-same": "Unchanged", "p2-changed": "Update", "p2-stale": "Delete"}
	for name, action := range want {
		if actions[name] != action {
			t.Errorf("plan for %s = %q, want %q (plan %v)", name, actions[name], action, actions)
		}
	}
	// The preview merged each child into the live one as kube-apiserver
	// would: what the hook dropped is pruned, the live metadata stays.
	local := childrenByName(answer)
	if data := local["p2-changed"]["data"]; !reflect.DeepEqual(data, map[string]interface{}{"color": "green", "item": "changed"}) {
		t.Errorf("preview of p2-changed: data %v, want color green and no stale", data)
	}
	if meta, _ := local["p2-same"]["metadata"].(map[string]interface{}); meta["uid"] == nil || meta["resourceVersion"] == nil {
		t.Errorf("preview of p2-same lost the live uid and resourceVersion: %v", meta)
	}
	// And kube-apiserver agrees: its dry-run applies store the same
	// children (ConfigMaps have no defaults), managedFields included.
	server, stderr, err := previewSync(t, suite.AdminKubeconfig, controller, ns, "p2", true)
	if err != nil {
		t.Fatalf("dry-run sync with serverDryRun: %v: %s", err, stderr)
	}
	remote := childrenByName(server)
	if len(remote) != len(local) {
		t.Errorf("server dry-run: %d children, local preview %d", len(remote), len(local))
	}
	for name, want := range remote {
		if got, want := storedForm(local[name]), storedForm(want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the local preview differs from kube-apiserver's dry run:\nlocal  %v\nserver %v", name, got, want)
		}
	}
	// Nothing changed: the stale child is there, the changed one still red.
	stale, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p2-stale", metav1.GetOptions{})
	if err != nil {
		t.Errorf("the dry-run deleted p2-stale: %v", err)
	} else if stale.DeletionTimestamp != nil {
		t.Errorf("the dry-run started deleting p2-stale")
	}
	changed, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p2-changed", metav1.GetOptions{})
	if err != nil || changed.Data["color"] != "red" {
		t.Errorf("the dry-run changed p2-changed: %v %v", err, changed.Data)
	}
}

func childrenByName(answer syncAnswer) map[string]map[string]interface{} {
	out := map[string]map[string]interface{}{}
	for _, child := range answer.Status.Children {
		meta, _ := child["metadata"].(map[string]interface{})
		out[fmt.Sprint(meta["name"])] = child
	}
	return out
}

// storedForm is what the local preview and kube-apiserver's dry-run apply
// must agree on: everything but what the apiserver alone sets (uid,
// creationTimestamp and resourceVersion of a create) and managedFields
// times.
func storedForm(child map[string]interface{}) map[string]interface{} {
	data, _ := json.Marshal(child)
	var out map[string]interface{}
	_ = json.Unmarshal(data, &out)
	meta, _ := out["metadata"].(map[string]interface{})
	for _, f := range []string{"uid", "creationTimestamp", "resourceVersion"} {
		delete(meta, f)
	}
	entries, _ := meta["managedFields"].([]interface{})
	for _, e := range entries {
		delete(e.(map[string]interface{}), "time")
	}
	sort.Slice(entries, func(i, j int) bool { return fmt.Sprint(entries[i]) < fmt.Sprint(entries[j]) })
	return out
}

// dryRunApplies is how many dry-run applies and patches of ConfigMaps
// kube-apiserver has served, by its apiserver_request_total.
func dryRunApplies(t *testing.T) float64 {
	t.Helper()
	data, err := suite.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("can't read kube-apiserver's /metrics: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="configmaps"`) ||
			!strings.Contains(line, `dry_run="All"`) || !(strings.Contains(line, `verb="APPLY"`) || strings.Contains(line, `verb="PATCH"`)) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("can't parse %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// TestDryRunSyncPreviewsWithoutApplyingToTheCluster: a preview computes
// the children it shows itself, from the children the sync listed, and
// sends kube-apiserver no apply for them; serverDryRun sends one per child.
func TestDryRunSyncPreviewsWithoutApplyingToTheCluster(t *testing.T) {
	// Sequential: it counts kube-apiserver's dry-run applies of ConfigMaps server-wide (apiserver_request_total has no namespace), which other tests' previews add to.
	const controller, ns = "sync-local", "sync-local"
	inPlaceHelloController(t, controller, ns)
	suite.MustApply(t, helloParent(ns, "p4", "blue", "a", "b", "c"))
	before := dryRunApplies(t)
	const previews = 5
	for i := 0; i < previews; i++ {
		answer, stderr, err := dryRunSync(t, suite.AdminKubeconfig, controller, ns, "p4")
		if err != nil {
			t.Fatalf("dry-run sync: %v: %s", err, stderr)
		}
		if len(answer.Status.Children) != 3 {
			t.Fatalf("children = %d, want 3 (warnings %q)", len(answer.Status.Children), answer.Status.Warnings)
		}
		for _, child := range answer.Status.Children {
			meta := child["metadata"].(map[string]interface{})
			if managers := fmt.Sprint(meta["managedFields"]); !strings.Contains(managers, "metacontroller.k8s.io/"+controller) {
				t.Errorf("child %v is not managed by metacontroller.k8s.io/%s: %s", meta["name"], controller, managers)
			}
			if refs := fmt.Sprint(meta["ownerReferences"]); !strings.Contains(refs, "p4") {
				t.Errorf("child %v is not owned by p4: %s", meta["name"], refs)
			}
			if meta["uid"] != nil {
				t.Errorf("child %v has a uid: kube-apiserver stored it, or it exists", meta["name"])
			}
		}
	}
	if after := dryRunApplies(t); after != before {
		t.Errorf("%d previews sent %v dry-run applies of ConfigMaps to kube-apiserver, want none", previews, after-before)
	}

	// The counter does count them: serverDryRun sends one per child.
	before = dryRunApplies(t)
	if _, stderr, err := previewSync(t, suite.AdminKubeconfig, controller, ns, "p4", true); err != nil {
		t.Fatalf("dry-run sync with serverDryRun: %v: %s", err, stderr)
	}
	if after := dryRunApplies(t); after-before != 3 {
		t.Errorf("a preview with serverDryRun sent %v dry-run applies of ConfigMaps, want 3", after-before)
	}
}

func TestSyncNeedsCreateOnTheSyncSubresource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const controller, ns = "sync-rbac", "sync-rbac"
	inPlaceHelloController(t, controller, ns)
	parent := helloParent(ns, "p3", "blue", "a")
	suite.MustApply(t, parent)
	// viewer may read controllers but not sync; syncer may sync but not
	// read the parents.
	grant := func(name string, rules []rbacv1.PolicyRule) string {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name}, Rules: rules}
		if _, err := suite.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}},
		}
		if _, err := suite.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		kubeconfig, err := suite.UserKubeconfig(name)
		if err != nil {
			t.Fatal(err)
		}
		return kubeconfig
	}
	viewer := grant("sync-viewer", []rbacv1.PolicyRule{{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, Verbs: []string{"get", "list"}}})
	syncer := grant("sync-blind", []rbacv1.PolicyRule{{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/sync"}, Verbs: []string{"create"}}})
	full := grant("sync-full", []rbacv1.PolicyRule{
		{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/sync"}, Verbs: []string{"create"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"list"}},
	})

	if _, stderr, err := dryRunSync(t, viewer, controller, ns, "p3"); err == nil || !strings.Contains(stderr, "Forbidden") {
		t.Errorf("a user without create on compositecontrollers/sync: err=%v %s, want Forbidden", err, stderr)
	}
	if _, stderr, err := dryRunSync(t, syncer, controller, ns, "p3"); err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "hellos") {
		t.Errorf("a user who may sync but not read the parent: err=%v %s, want Forbidden naming hellos", err, stderr)
	}
	// Delegated authorization caches answers for a few seconds.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _, err := dryRunSync(t, full, controller, ns, "p3")
		return err == nil, nil
	})
	if err != nil {
		_, stderr, _ := dryRunSync(t, full, controller, ns, "p3")
		t.Errorf("a user with create on compositecontrollers/sync and read rights was refused: %s", stderr)
	}

	// serverDryRun shows each child as the cluster would store it, merged
	// with what is stored now and read with the server's rights: the
	// caller must be allowed to get each child, or the preview is refused
	// (the children's names and kinds are said, never their data).
	if _, stderr, err := previewSync(t, full, controller, ns, "p3", true); err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "may not get") {
		t.Errorf("a user who may not get the children previewed them as stored: err=%v %s, want Forbidden", err, stderr)
	}
	reader := grant("sync-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/sync"}, Verbs: []string{"create"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"list", "get"}},
	})
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _, err := previewSync(t, reader, controller, ns, "p3", true)
		return err == nil, nil
	})
	if err != nil {
		_, stderr, _ := previewSync(t, reader, controller, ns, "p3", true)
		t.Errorf("a user who may get the children was refused their server dry-run: %s", stderr)
	}
}

func ptrTo[T any](v T) *T { return &v }

var (
	helloOnce sync.Once
	helloErr  error
)

// TestTypedClientSyncMethodPreviews uses the generated clientset's Sync
// method, as a Go program would.
func TestTypedClientSyncMethodPreviews(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	hook := setUpHellos(t)
	ctx := context.Background()
	const controller = "sync-typed"
	suite.MustApply(t, helloController(controller, hook.URL, "InPlace"))
	client, err := clientset.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	parent := []byte(`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"inline","namespace":"default"},"spec":{"color":"blue","configMaps":["x"]}}`)
	answer, err := client.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, controller,
		&v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{Raw: parent}}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !answer.Status.DryRun || len(answer.Status.Plan) != 1 || answer.Status.Plan[0].Action != v1alpha1.SyncActionCreate || answer.Status.Plan[0].Name != "inline-x" {
		t.Errorf("Sync answered %+v, want a dry-run plan creating inline-x", answer.Status)
	}
}
