package loop

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var (
	pods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	podRightsOnce  sync.Once
	podRightsError error
)

// mutatedTimeout bounds the waits of the tests of children that admission
// mutates, which run ten controllers at once: a rolling update of Pods
// moves one at a time, on a shared machine.
const mutatedTimeout = 3 * time.Minute

// mutatedChildren are the children of one parent in the tests of children
// that admission mutates: two, named <parent>-0 and <parent>-1.
var mutatedChildren = []string{"0", "1"}

// mutatedHook answers for the parents of one test with two children of
// kind (Pod or ConfigMap) at the parent's spec.version (a Pod's image, a
// ConfigMap's data.version), asking to be called again every second: each
// call is a fresh sync whose plan the test can then look at. It counts the
// calls that observed both children, per parent.
type mutatedHook struct {
	kind string
	mu   sync.Mutex
	// calls counts, per parent, the calls that observed every child.
	calls map[string]int
}

func (h *mutatedHook) sync(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	parent := req.Parent.GetName()
	version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
	h.mu.Lock()
	if len(req.Children[h.kind+".v1"]) == len(mutatedChildren) {
		h.calls[parent]++
	}
	h.mu.Unlock()
	resp := &hookapi.SyncHookResponse{ResyncAfterSeconds: 1, Status: map[string]interface{}{"version": version}}
	for _, n := range mutatedChildren {
		resp.Children = append(resp.Children, h.child(parent+"-"+n, parent, version))
	}
	return resp, nil
}

// child is what the hook asks for. A Pod sets what admission and defaulting
// then add to: tolerations (DefaultTolerationSeconds appends two to the
// list), volumes and volumeMounts (the ServiceAccount plugin adds the
// kube-api-access token volume and its mount), a downward API volume and
// env var (defaulting adds fieldRef.apiVersion inside structures that
// server-side apply replaces whole, as in Metacontroller's CatSet). A
// ConfigMap sets a label that the namespace's MutatingAdmissionPolicy
// overrides, beside the data key it adds.
func (h *mutatedHook) child(name, parent, version string) *unstructured.Unstructured {
	fieldRef := func() map[string]interface{} {
		return map[string]interface{}{"fieldRef": map[string]interface{}{"fieldPath": "metadata.name"}}
	}
	if h.kind == "ConfigMap" {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": name, "labels": map[string]interface{}{"app": parent, "team": "hook"}},
			"data":     map[string]interface{}{"version": version},
		}}
	}
	env := fieldRef()
	env["name"] = "POD_NAME"
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]interface{}{"name": name, "labels": map[string]interface{}{"app": parent}},
		"spec": map[string]interface{}{
			"terminationGracePeriodSeconds": int64(1),
			"containers": []interface{}{map[string]interface{}{
				"name": "main", "image": version,
				"env":          []interface{}{map[string]interface{}{"name": "POD_NAME", "valueFrom": fieldRef()}},
				"volumeMounts": []interface{}{map[string]interface{}{"name": "info", "mountPath": "/etc/info"}},
			}},
			"tolerations": []interface{}{map[string]interface{}{"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}},
			"volumes": []interface{}{map[string]interface{}{"name": "info", "downwardAPI": map[string]interface{}{
				"items": []interface{}{map[string]interface{}{"path": "name", "fieldRef": map[string]interface{}{"fieldPath": "metadata.name"}}},
			}}},
		},
	}}
}

// waitFreshCalls waits for n more calls about parent that observed every
// child than have been counted so far: n syncs that started after now.
func (h *mutatedHook) waitFreshCalls(t *testing.T, parent string, n int) {
	t.Helper()
	h.mu.Lock()
	want := h.calls[parent] + n
	h.mu.Unlock()
	suite.Within(t, fmt.Sprintf("%d more hook calls about %s that observed its children", n, parent), mutatedTimeout, func() (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.calls[parent] >= want, nil
	})
}

// mutatedChild is what a test sees of one child.
type mutatedChild struct {
	UID, ResourceVersion, Version string
}

// mutatedChildrenOf are the children of the parent's name, by suffix.
func mutatedChildrenOf(t *testing.T, gvr schema.GroupVersionResource, ns, parent string) map[string]mutatedChild {
	t.Helper()
	list, err := suite.Dynamic.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mutatedChild{}
	for _, obj := range list.Items {
		suffix, ok := strings.CutPrefix(obj.GetName(), parent+"-")
		if !ok || obj.GetDeletionTimestamp() != nil {
			continue
		}
		version, _, _ := unstructured.NestedString(obj.Object, "data", "version")
		if containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "containers"); len(containers) > 0 {
			version, _, _ = unstructured.NestedString(containers[0].(map[string]interface{}), "image")
		}
		out[suffix] = mutatedChild{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion(), Version: version}
	}
	return out
}

// waitMutatedChildren waits until the parent has every child at version,
// and returns them.
func waitMutatedChildren(t *testing.T, gvr schema.GroupVersionResource, ns, parent, version string) map[string]mutatedChild {
	t.Helper()
	var got map[string]mutatedChild
	suite.Within(t, fmt.Sprintf("the children of %s at %s", parent, version), mutatedTimeout, func() (bool, error) {
		got = mutatedChildrenOf(t, gvr, ns, parent)
		if len(got) != len(mutatedChildren) {
			return false, fmt.Errorf("children %v", got)
		}
		for _, c := range got {
			if c.Version != version {
				return false, fmt.Errorf("children %v", got)
			}
		}
		return true, nil
	})
	return got
}

// onDeleteReason is the reason a preview gives a child that
// updateStrategy OnDelete leaves alone and that differs by the local merge:
// the loop never asks the target cluster about such a child, so the
// preview cannot tell a change of the hook's from what admission added.
const onDeleteReason = "differs by the local merge, which does not see the cluster's defaulting and admission; updateStrategy OnDelete updates it only once deleted"

// previewPlan is the plan of a /sync dry run of parent.
func previewPlan(t *testing.T, ns, ctrl, parent string) ([]v1alpha1.SyncPlanItem, error) {
	t.Helper()
	preview, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(context.Background(), ctrl, &v1alpha1.SyncRequest{
		Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: parent}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, err
	}
	return preview.Status.Plan, nil
}

// unconverged says what of a /sync dry run's plan is not a child left
// unchanged for no reason; under OnDelete, the local merge's difference
// may show, with onDeleteReason.
func unconverged(plan []v1alpha1.SyncPlanItem, method v1alpha1.ChildUpdateMethod) []string {
	var out []string
	if len(plan) != len(mutatedChildren) {
		out = append(out, fmt.Sprintf("%d children planned, want %d", len(plan), len(mutatedChildren)))
	}
	for _, item := range plan {
		switch {
		case item.Action == v1alpha1.SyncActionUnchanged && item.Reason == "" && len(item.Diff) == 0:
		case item.Action == v1alpha1.SyncActionUnchanged && method == v1alpha1.ChildUpdateOnDelete && item.Reason == onDeleteReason && len(item.Diff) > 0:
		default:
			out = append(out, fmt.Sprintf("%s %s %s: %q, diff %q", item.Action, item.Kind, item.Name, item.Reason, item.Diff))
		}
	}
	return out
}

// assertStable checks, after several fresh syncs, that no child was
// written, deleted or recreated since before, that (with noEvents, when
// the hook never asked for a change) no Event of the parent says a child
// differs, that a /sync dry run plans every child unchanged, and that a
// fleet preview of the controller does too. A preview asks the target
// cluster nothing, so it knows what admission did to a child from what
// the loop learnt of it (the loop's dry runs, and what its applies
// stored): the children the update strategy would write are planned
// unchanged for no reason, as the loop plans them. Under OnDelete the
// loop asks the cluster nothing either, and the preview may show the local
// merge's difference, with onDeleteReason.
func assertStable(t *testing.T, hook *mutatedHook, gvr schema.GroupVersionResource, ns, ctrl, parent string, method v1alpha1.ChildUpdateMethod, before map[string]mutatedChild, noEvents bool) {
	t.Helper()
	hook.waitFreshCalls(t, parent, 3)
	if after := mutatedChildrenOf(t, gvr, ns, parent); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the children of %s changed although the hook asked for nothing new: before %v, after %v", parent, before, after)
	}
	for _, e := range events(t, ns, parent) {
		if noEvents && (strings.Contains(e, "differs") || strings.Contains(e, "ChildRecreating") || strings.Contains(e, "ChildUpdated")) {
			t.Errorf("Event of %s: %s", parent, e)
		}
	}
	plan, err := previewPlan(t, ns, ctrl, parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range unconverged(plan, method) {
		t.Errorf("/sync dry run of %s: %s; want every child unchanged", parent, p)
	}
	fleet, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Preview(context.Background(), ctrl, &v1alpha1.FleetPreview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fleet.Status.Parents) != 1 {
		t.Fatalf("fleet preview of %s: parents %+v, want %s only", ctrl, fleet.Status.Parents, parent)
	}
	if p := fleet.Status.Parents[0]; len(p.Changes) > 0 || p.Counts.Unchanged != int32(len(mutatedChildren)) || p.Error != "" {
		var changes []string
		for _, c := range p.Changes {
			changes = append(changes, fmt.Sprintf("%s %s %s: %s %q", c.Action, c.Kind, c.Name, c.Reason, c.Diff))
		}
		t.Errorf("fleet preview of %s: changes %q, %d unchanged, error %q; want every child unchanged", parent, changes, p.Counts.Unchanged, p.Error)
	}
}

// installPodRights lets composite-apiserver manage Pods, as an admin grants
// it for a controller of Pods.
func installPodRights(t *testing.T) {
	t.Helper()
	podRightsOnce.Do(func() {
		podRightsError = suite.Apply(context.Background(), serverRights("mutated-pods", "", []string{"pods"}, "get", "list", "watch", "create", "update", "patch", "delete"))
	})
	if podRightsError != nil {
		t.Fatal(podRightsError)
	}
}

// defaultServiceAccount creates the namespace's ServiceAccount default,
// which the test stack's kube-controller-manager does not make: the
// ServiceAccount admission plugin refuses Pods without it, and with it
// adds the kube-api-access token volume to each.
func defaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := suite.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// mutatingPolicy is a MutatingAdmissionPolicy, bound to namespace ns only,
// that adds data.injected to every ConfigMap and sets its label team to
// platform, whatever the hook asked for.
func mutatingPolicy(name, ns string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{
          metadata: Object.metadata{labels: {"team": "platform"}},
          data: {"injected": "by-policy"}
        }
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[2]s}
`, name, ns)
}

// installMutatingPolicy applies mutatingPolicy and waits until it mutates
// a ConfigMap created (dry run) in ns: admission policies take effect a
// moment after they are stored.
func installMutatingPolicy(t *testing.T, name, ns string) {
	t.Helper()
	suite.MustApply(t, mutatingPolicy(name, ns))
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "--ignore-not-found", "mutatingadmissionpolicybinding/"+name, "mutatingadmissionpolicy/"+name)
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"team": "probe"}}}
	suite.Eventually(t, "the MutatingAdmissionPolicy "+name+" in effect", func() (bool, error) {
		got, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Data["injected"] == "by-policy" && got.Labels["team"] == "platform", nil
	})
}

// TestChildrenThatAdmissionMutatesAreStable: a child whose live object
// carries what the hook never set, or not as the hook set it (admission,
// defaulting), is neither updated nor recreated for it, under every update
// strategy, while a change the hook makes still rolls out as the strategy
// says (issue 32 item 3). Pods: the ServiceAccount plugin's token volume and
// mount, DefaultTolerationSeconds' two tolerations appended to the hook's,
// fieldRef.apiVersion defaulted in a downward API volume and env var.
// ConfigMaps: a MutatingAdmissionPolicy that adds a data key and overrides
// a label the hook sets. After several fresh syncs, no child's UID or
// resourceVersion moved, no Event says a child differs, and the /sync dry
// run and the fleet preview plan every child unchanged, by what the loop
// learnt from the cluster (under OnDelete, which asks the cluster nothing,
// the /sync dry run may show the local merge's difference, for
// onDeleteReason; and it does show the hook's change before the children
// are deleted). Before the fix, the
// loop compared the hook's object with the live one by its own merge, which
// sees neither admission nor defaulting: Recreate and RollingRecreate
// deleted and recreated the Pods on every sync, and every strategy's plan
// said "differs".
func TestChildrenThatAdmissionMutatesAreStable(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	installPodRights(t)
	methods := []v1alpha1.ChildUpdateMethod{
		v1alpha1.ChildUpdateOnDelete, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateInPlace,
		v1alpha1.ChildUpdateRollingRecreate, v1alpha1.ChildUpdateRollingInPlace,
	}
	for _, kind := range []string{"Pod", "ConfigMap"} {
		for _, method := range methods {
			t.Run(kind+"/"+string(method), func(t *testing.T) {
				t.Parallel()
				mutatedStrategy(t, kind, method)
			})
		}
	}
}

// mutatedStrategy is one case of TestChildrenThatAdmissionMutatesAreStable.
func mutatedStrategy(t *testing.T, kind string, method v1alpha1.ChildUpdateMethod) {
	ctrl := "mutated-" + strings.ToLower(kind) + "-" + strings.ToLower(string(method))
	ns := suite.Namespace(t, ctrl)
	gvr := pods
	if kind == "ConfigMap" {
		gvr = configMapsGVR
		installMutatingPolicy(t, ctrl, ns)
	} else {
		defaultServiceAccount(t, ns)
	}
	hook := &mutatedHook{kind: kind, calls: map[string]int{}}
	server := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(hook.sync)))
	t.Cleanup(server.Close)
	manifest := framework.ControllerFixture{Name: ctrl, HookURL: server.URL, Child: gvr, Method: string(method), Timeout: "10s"}.Manifest()
	suite.ApplyController(t, ctrl, manifest)
	suite.WaitRunning(t, ctrl)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Events of p:\n%s", strings.Join(events(t, ns, "p"), "\n"))
		}
	})

	suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{"version": "v1"})
	before := waitMutatedChildren(t, gvr, ns, "p", "v1")
	assertMutated(t, kind, ns, "p-0")
	assertStable(t, hook, gvr, ns, ctrl, "p", method, before, true)

	// A change the hook makes is still a change: it rolls out as the
	// strategy says, and the new children are as stable.
	suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"version": "v2"})
	if method == v1alpha1.ChildUpdateOnDelete {
		hook.waitFreshCalls(t, "p", 2)
		if got := mutatedChildrenOf(t, gvr, ns, "p"); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatalf("OnDelete changed children before they were deleted: before %v, after %v", before, got)
		}
		assertOnDeletePreview(t, ns, ctrl, "p", "v2")
		for _, n := range mutatedChildren {
			if err := suite.Dynamic.Resource(gvr).Namespace(ns).Delete(context.Background(), "p-"+n, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := waitMutatedChildren(t, gvr, ns, "p", "v2")
	inPlace := method == v1alpha1.ChildUpdateInPlace || method == v1alpha1.ChildUpdateRollingInPlace
	for _, n := range mutatedChildren {
		if same := after[n].UID == before[n].UID; same != inPlace {
			t.Errorf("%s %s after the change: UID %s, before %s; updateStrategy %s keeps it: %v", kind, "p-"+n, after[n].UID, before[n].UID, method, inPlace)
		}
	}
	assertStable(t, hook, gvr, ns, ctrl, "p", method, after, false)
}

// assertOnDeletePreview checks that a /sync dry run shows the change the
// hook asked for of the children that OnDelete leaves alone: each
// unchanged, with onDeleteReason and a difference that names version.
func assertOnDeletePreview(t *testing.T, ns, ctrl, parent, version string) {
	t.Helper()
	plan, err := previewPlan(t, ns, ctrl, parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != len(mutatedChildren) {
		t.Errorf("/sync dry run of %s plans %d children, want %d", parent, len(plan), len(mutatedChildren))
	}
	for _, item := range plan {
		if item.Action != v1alpha1.SyncActionUnchanged || item.Reason != onDeleteReason || !strings.Contains(strings.Join(item.Diff, "\n"), version) {
			t.Errorf("/sync dry run of %s: %s %s %s: %q, diff %q; want it unchanged, for %q, with a difference naming %s",
				parent, item.Action, item.Kind, item.Name, item.Reason, item.Diff, onDeleteReason, version)
		}
	}
}

// assertMutated checks that admission did mutate the child, so that the
// test proves what it says.
func assertMutated(t *testing.T, kind, ns, name string) {
	t.Helper()
	if kind == "ConfigMap" {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["injected"] != "by-policy" || cm.Labels["team"] != "platform" {
			t.Fatalf("ConfigMap %s not mutated by the policy: data %v, labels %v", name, cm.Data, cm.Labels)
		}
		return
	}
	pod, err := suite.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var volumes, tolerations []string
	for _, v := range pod.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, tol := range pod.Spec.Tolerations {
		tolerations = append(tolerations, tol.Key)
	}
	sort.Strings(volumes)
	if len(volumes) != 2 || !strings.HasPrefix(volumes[1], "kube-api-access-") || len(tolerations) != 3 {
		t.Fatalf("Pod %s not mutated by admission as the test expects: volumes %v, tolerations %v", name, volumes, tolerations)
	}
	if ref := pod.Spec.Volumes[0].DownwardAPI; ref == nil || ref.Items[0].FieldRef.APIVersion != "v1" {
		t.Fatalf("Pod %s: fieldRef.apiVersion not defaulted: %+v", name, pod.Spec.Volumes[0])
	}
}
