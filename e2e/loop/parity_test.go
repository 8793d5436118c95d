package loop

// End-to-end tests of Metacontroller's behaviour that a migrating user
// relies on (the parity issue): each would fail on the loop as it was
// before, and each waits for a fresh signal of its own case.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// serverRights is a ClusterRole, named composite-apiserver-<name>, that
// gives composite-apiserver verbs on resources of group through the
// aggregated ClusterRole of artifacts/deploy/rbac.yaml, as an admin grants
// it rights for a controller: a YAML document to apply, "---" first.
func serverRights(name, group string, resources []string, verbs ...string) string {
	return fmt.Sprintf(`---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: composite-apiserver-%s
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
- apiGroups: [%q]
  resources: [%s]
  verbs: [%s]
`, name, group, quoted(resources), quoted(verbs))
}

func quoted(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = strconv.Quote(s)
	}
	return strings.Join(out, ", ")
}

// parentVerbs are the rights the server needs on a parent resource and its
// status.
var parentVerbs = []string{"get", "list", "watch", "update", "patch"}

// widgetCRD is a CRD of parity.example.com and the server's rights on it.
func widgetCRD(plural, kind string, status bool) string {
	return framework.CRD{Group: "parity.example.com", Plural: plural, Kind: kind, NoStatus: !status}.Manifest() +
		serverRights("parity-"+plural, "parity.example.com", []string{plural, plural + "/status"}, parentVerbs...)
}

func parityController(name, plural, hookURL string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource: {apiVersion: parity.example.com/v1, resource: %s}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s/sync, timeout: 3s}
`, name, plural, hookURL)
}

func ccReady(t *testing.T, name string) *v1alpha1.CompositeController {
	t.Helper()
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A controller applied in one go with the CRD of its parents starts as soon
// as the CRD is served, with no restart: discovery is read again.
func TestControllerAppliedWithItsCRDStarts(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-crd")
	// The controller first, as `kubectl apply -k` may well order it.
	suite.ApplyController(t, "parity-crd", parityController("parity-crd", "widgets", hook.URL))
	suite.MustApply(t, widgetCRD("widgets", "Widget", true))
	suite.Eventually(t, "controller parity-crd Ready once its CRD is served", func() (bool, error) {
		c := ccReady(t, "parity-crd")
		return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady), nil
	})
	widgets := schema.GroupVersionResource{Group: "parity.example.com", Version: "v1", Resource: "widgets"}
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "parity.example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": ns},
		"spec":     framework.HelloSpec("blue", "a"),
	}}
	if _, err := suite.Dynamic.Resource(widgets).Namespace(ns).Create(context.Background(), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.WaitConfigMaps(t, ns, "w-a")
	waitControllerEvent(t, ccUID(t, "parity-crd"), "Started", "Started controller: parity-crd")
}

// A parent resource without a status subresource is said on the
// CompositeController's status and in an Event, as Metacontroller does,
// instead of failing every sync.
func TestParentWithoutStatusSubresourceIsReported(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	suite.MustApply(t, widgetCRD("gadgets", "Gadget", false))
	if _, stderr, err := suite.Kubectl(context.Background(), "wait", "--for=condition=Established", "crd/gadgets.parity.example.com", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	suite.ApplyController(t, "parity-nostatus", parityController("parity-nostatus", "gadgets", hook.URL))
	suite.Eventually(t, "Ready=False NoStatusSubresource", func() (bool, error) {
		c := meta.FindStatusCondition(ccReady(t, "parity-nostatus").Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NoStatusSubresource" &&
			strings.Contains(c.Message, "gadgets.parity.example.com") && strings.Contains(c.Message, "no status subresource"), nil
	})
	waitControllerEvent(t, ccUID(t, "parity-nostatus"), "SyncError", "has no status subresource")
}

// A data key, a label and an annotation the hook stops returning are
// removed from the child on the next sync, without recreating it.
func TestFieldsTheHookDropsAreRemoved(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-prune")
	framework.HelloController{Name: "parity-prune", HookURL: hook.URL}.Create(t, suite)
	s := framework.HelloSpec("blue", "a")
	s["data"] = map[string]interface{}{"keep": "1", "drop": "2"}
	s["labels"] = map[string]interface{}{"tier": "gold"}
	suite.CreateHello(t, ns, "p", "parity-prune", s)
	suite.Eventually(t, "ConfigMap p-a with keys keep and drop and label tier", func() (bool, error) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cm.Data["drop"] == "2" && cm.Labels["tier"] == "gold", nil
	})
	before, _ := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})

	s["data"] = map[string]interface{}{"keep": "1"}
	delete(s, "labels")
	suite.SetHelloSpec(t, ns, "p", s)
	var after *corev1.ConfigMap
	suite.Eventually(t, "data key drop and label tier removed from p-a", func() (bool, error) {
		var err error
		after, err = suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, hasDrop := after.Data["drop"]
		_, hasTier := after.Labels["tier"]
		return !hasDrop && !hasTier, nil
	})
	if after.UID != before.UID || after.Data["keep"] != "1" || after.Data["color"] != "blue" {
		t.Errorf("p-a was recreated or lost what the hook still returns: uid %s -> %s, data %v", before.UID, after.UID, after.Data)
	}
}

// Children that Metacontroller wrote (field manager "metacontroller", its
// last-applied annotation) are taken over in place: a field the hook no
// longer returns goes, nothing is recreated, and the annotation is dropped.
func TestMigrationFromMetacontroller(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-migrate")
	// The parent exists before the framework.HelloController, as after uninstalling
	// Metacontroller.
	parent := suite.CreateHello(t, ns, "p", "parity-migrate", framework.HelloSpec("blue", "a"))
	before := createAsMetacontroller(t, parent)
	framework.HelloController{Name: "parity-migrate", HookURL: hook.URL}.Create(t, suite)
	var after *corev1.ConfigMap
	var err error
	suite.Eventually(t, "p-a taken over: legacy key and last-applied annotation gone", func() (bool, error) {
		after, err = suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, legacy := after.Data["legacy"]
		_, annotation := after.Annotations["metacontroller.k8s.io/last-applied-configuration"]
		return !legacy && !annotation, nil
	})
	if after.UID != before.UID {
		t.Errorf("p-a was recreated: uid %s -> %s", before.UID, after.UID)
	}
	managers := map[string]bool{}
	for _, e := range after.ManagedFields {
		managers[e.Manager] = true
	}
	if managers["metacontroller"] || !managers["metacontroller.k8s.io/parity-migrate"] {
		t.Errorf("field managers %v: want Metacontroller's fields under metacontroller.k8s.io/parity-migrate", managers)
	}
	waitEvent(t, ns, "p", "TakeOver ConfigMap "+ns+"/p-a")
}

// createAsMetacontroller creates the parent's child ConfigMap <parent>-a as
// Metacontroller would have written it for hook.py's answer to framework.HelloSpec("blue",
// "a"), with a data key "legacy" its hook no longer returns.
func createAsMetacontroller(t *testing.T, parent *unstructured.Unstructured) *corev1.ConfigMap {
	t.Helper()
	ns, name := parent.GetNamespace(), parent.GetName()
	lastApplied := map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name + "-a", "namespace": ns,
			"labels": map[string]interface{}{"app": name, "controller-uid": string(parent.GetUID())}},
		"data": map[string]interface{}{"color": "blue", "item": "a", "legacy": "from an old hook"},
	}
	raw, _ := json.Marshal(lastApplied)
	written := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-a", Namespace: ns,
			Labels:      map[string]string{"app": name, "controller-uid": string(parent.GetUID())},
			Annotations: map[string]string{"metacontroller.k8s.io/last-applied-configuration": string(raw)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: name, UID: parent.GetUID(),
				Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}},
		},
		Data: map[string]string{"color": "blue", "item": "a", "legacy": "from an old hook"},
	}
	// Metacontroller's default "dynamic apply" creates with its own name
	// as the field manager.
	created, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), written, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// The takeover changes Metacontroller's managedFields entry only: a label
// that `kubectl label` set on the child stays kubectl's, so a later
// `kubectl label --overwrite` or apply conflict check still sees its owner.
func TestMigrationKeepsOtherManagersFields(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-migrate-keep")
	parent := suite.CreateHello(t, ns, "p", "parity-migrate-keep", framework.HelloSpec("blue", "a"))
	createAsMetacontroller(t, parent)
	if _, stderr, err := suite.Kubectl(context.Background(), "label", "-n", ns, "configmap", "p-a", "team=payments"); err != nil {
		t.Fatalf("kubectl label: %v: %s", err, stderr)
	}
	labelledBy := func(cm *corev1.ConfigMap) []string {
		var out []string
		for _, e := range cm.ManagedFields {
			if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:team"`) {
				out = append(out, e.Manager+"/"+string(e.Operation))
			}
		}
		return out
	}
	labelled, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := labelledBy(labelled); len(got) != 1 || got[0] != "kubectl-label/Update" {
		t.Fatalf("before the takeover the label team is owned by %q, want kubectl-label/Update", got)
	}

	framework.HelloController{Name: "parity-migrate-keep", HookURL: hook.URL}.Create(t, suite)
	ours := "metacontroller.k8s.io/parity-migrate-keep"
	var after *corev1.ConfigMap
	suite.Eventually(t, "p-a taken over: "+ours+" in its managedFields, Metacontroller's entry gone", func() (bool, error) {
		after, err = suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		managers := map[string]bool{}
		for _, e := range after.ManagedFields {
			managers[e.Manager] = true
		}
		return managers[ours] && !managers["metacontroller"], nil
	})
	if got := labelledBy(after); len(got) != 1 || got[0] != "kubectl-label/Update" {
		var managers []string
		for _, e := range after.ManagedFields {
			fields := ""
			if e.FieldsV1 != nil {
				fields = string(e.FieldsV1.Raw)
			}
			managers = append(managers, e.Manager+"/"+string(e.Operation)+" "+fields)
		}
		t.Errorf("after the takeover the label team is owned by %q, want kubectl-label/Update; managedFields:\n%s", got, strings.Join(managers, "\n"))
	}
	if after.Labels["team"] != "payments" {
		t.Errorf("label team is %q, want payments", after.Labels["team"])
	}
}

// An object that has the name of a desired child, no controller and labels
// that do not match the parent's selector is left alone, as Metacontroller's
// create would fail with AlreadyExists; the parent's Events say so.
func TestObjectsNotOursAreNotTakenOver(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-notours")
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p-a", Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Data: map[string]string{"color": "theirs"}}
	if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.HelloController{Name: "parity-notours", HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", "parity-notours", framework.HelloSpec("blue", "a", "b"))
	suite.WaitConfigMaps(t, ns, "p-a", "p-b")
	waitEvent(t, ns, "p", "ConfigMap.v1 "+ns+"/p-a exists without a controller and does not match the parent's selector; it is left alone")
	got, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "p-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Data["color"] != "theirs" || got.Labels["app"] != "" {
		t.Errorf("p-a was taken over: owners %v, data %v, labels %v", got.OwnerReferences, got.Data, got.Labels)
	}
}

// The finalizer never keeps a parent: removed when the controller loses its
// finalize hook, and the finalize hook runs for a parent that stopped
// matching the label selector, its status written meanwhile.
func TestFinalizersNeverLeaveParentsStuck(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-final")
	finalizer := "metacontroller.io/compositecontroller-parity-final"
	withFinalize := framework.HelloController{Name: "parity-final", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithFinalize(framework.HookAt(hook.URL+"/finalize", 3*time.Second))
	}}
	withFinalize.Create(t, suite)
	suite.CreateHello(t, ns, "p", "parity-final", framework.HelloSpec("blue", "a"))
	suite.Eventually(t, "finalizer on p", func() (bool, error) {
		return hasFinalizer(suite.GetHello(t, ns, "p"), finalizer), nil
	})

	// The controller loses its finalize hook: the finalizer goes.
	suite.MustApply(t, framework.HelloController{Name: "parity-final", HookURL: hook.URL}.Manifest())
	suite.Eventually(t, "finalizer removed from p", func() (bool, error) {
		return !hasFinalizer(suite.GetHello(t, ns, "p"), finalizer), nil
	})

	// With the finalize hook again, a parent relabelled out of the
	// controller's selector is finalized: its children go, then the
	// finalizer.
	suite.MustApply(t, withFinalize.Manifest())
	suite.Eventually(t, "finalizer back on p", func() (bool, error) {
		return hasFinalizer(suite.GetHello(t, ns, "p"), finalizer), nil
	})
	callsBefore := calls(t, hook, "/finalize "+ns+"/p")
	suite.Eventually(t, "relabel p", func() (bool, error) {
		p := suite.GetHello(t, ns, "p")
		p.SetLabels(map[string]string{"test": "someone-else"})
		_, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Update(context.Background(), p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	suite.Eventually(t, "finalize hook called for p, its status written", func() (bool, error) {
		p := suite.GetHello(t, ns, "p")
		f, _, _ := unstructured.NestedBool(p.Object, "status", "finalizing")
		return calls(t, hook, "/finalize "+ns+"/p") > callsBefore && (f || !hasFinalizer(p, finalizer)), nil
	})
	suite.Eventually(t, "p finalized: finalizer removed, children deleted", func() (bool, error) {
		return !hasFinalizer(suite.GetHello(t, ns, "p"), finalizer) && len(suite.ConfigMaps(t, ns)) == 0, nil
	})
}

// resyncPeriodSeconds resyncs a parent even when its hook asks for a later
// resync: the smaller wins.
func TestResyncPeriodWinsOverALaterResyncAfter(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-resync")
	framework.HelloController{Name: "parity-resync", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithResyncPeriodSeconds(1)
	}}.Create(t, suite)
	s := framework.HelloSpec("blue", "a")
	s["resyncAfter"] = 3600
	suite.CreateHello(t, ns, "p", "parity-resync", s)
	suite.WaitConfigMaps(t, ns, "p-a")
	first := calls(t, hook, "/sync "+ns+"/p")
	suite.Eventually(t, "three more syncs of an unchanged parent", func() (bool, error) {
		return calls(t, hook, "/sync "+ns+"/p") >= first+3, nil
	})
}

// Related objects: a namespaced parent sees cluster-scoped ones, and a
// change to a related object re-syncs the parents whose rules select it and
// no other.
func TestRelatedObjects(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "parity-related")
	suite.MustApply(t, serverRights("parity-namespaces", "", []string{"namespaces"}, "get", "list", "watch"))
	framework.HelloController{Name: "parity-related", HookURL: hook.URL, Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.WithCustomize(framework.HookAt(hook.URL+"/customize", 3*time.Second))
	}}.Create(t, suite)

	// A cluster-scoped related object, from a namespaced parent.
	s := framework.HelloSpec("blue")
	s["related"] = map[string]interface{}{"apiVersion": "v1", "resource": "namespaces", "names": []interface{}{ns}}
	suite.CreateHello(t, ns, "cluster", "parity-related", s)
	suite.Eventually(t, "parent cluster sees its namespace as a related object", func() (bool, error) {
		n, _, _ := unstructured.NestedInt64(suite.GetHello(t, ns, "cluster").Object, "status", "relatedObjects")
		return n == 1, nil
	})

	// Two parents selecting different Secrets.
	for _, team := range []string{"a", "b"} {
		s := framework.HelloSpec("blue")
		s["related"] = map[string]interface{}{"apiVersion": "v1", "resource": "secrets",
			"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"team": team}}}
		suite.CreateHello(t, ns, "team-"+team, "parity-related", s)
	}
	for _, team := range []string{"a", "b"} {
		suite.WaitObserved(t, ns, "team-"+team, 1)
	}
	bBefore := calls(t, hook, "/sync "+ns+"/team-b")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "for-a", Namespace: ns, Labels: map[string]string{"team": "a"}}}
	if _, err := suite.Kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "team-a re-synced with the new Secret", func() (bool, error) {
		n, _, _ := unstructured.NestedInt64(suite.GetHello(t, ns, "team-a").Object, "status", "relatedObjects")
		return n == 1, nil
	})
	// team-a's resync is the fresh signal; team-b must not have been
	// called for a Secret its rule does not select.
	if got := calls(t, hook, "/sync "+ns+"/team-b"); got != bBefore {
		t.Errorf("team-b was synced %d more times for a Secret it does not select", got-bBefore)
	}
}

// Metacontroller's Events on the CompositeController: a definition that
// changes is stopped and started again.
func TestControllerLifecycleEvents(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	c := framework.HelloController{Name: "parity-events", HookURL: hook.URL}
	c.Create(t, suite)
	uid := ccUID(t, c.Name)
	waitControllerEvent(t, uid, "Started", "Started controller: parity-events")
	c.Spec = func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) { s.WithResyncPeriodSeconds(60) }
	suite.MustApply(t, c.Manifest())
	waitControllerEvent(t, uid, "Stopped", "Stopped controller: parity-events")
	suite.Eventually(t, "Started twice", func() (bool, error) {
		// The second Event is the first one's count going up: the
		// recorder aggregates identical Events.
		return eventsOf(t, metav1.NamespaceDefault, uid, "Started", "Started controller: parity-events") >= 2, nil
	})
}

func hasFinalizer(obj metav1.Object, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func calls(t *testing.T, hook *framework.PythonHook, key string) int {
	t.Helper()
	got, err := hook.Calls()
	if err != nil {
		t.Fatal(err)
	}
	return got[key]
}
