package loop

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

var (
	hellos = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}

	setUpOnce sync.Once
	setUpErr  error
	dyn       dynamic.Interface
	cc        clientset.Interface
)

// setUp installs the parent CRD and the controller's rights once, and
// returns a Python hook of the test's own, so that breaking it on purpose
// touches no other test.
func setUp(t *testing.T) *framework.PythonHook {
	t.Helper()
	setUpStack(t)
	dir := t.TempDir()
	hook, err := framework.StartPythonHook(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(hook.LogFile)
			t.Logf("hook log (tail):\n%s", tail(string(data), 3000))
		}
		hook.Stop()
	})
	return hook
}

// setUpStack installs the parent CRD and the controller's rights once, for
// tests that bring their own hook, and prints the stack's logs when t fails.
func setUpStack(t *testing.T) {
	t.Helper()
	setUpOnce.Do(func() {
		if setUpErr = stack.InstallHellos(context.Background()); setUpErr != nil {
			return
		}
		if dyn, setUpErr = dynamic.NewForConfig(stack.AdminConfig); setUpErr != nil {
			return
		}
		cc, setUpErr = clientset.NewForConfig(stack.AdminConfig)
	})
	if setUpErr != nil {
		t.Fatal(setUpErr)
	}
	dumpLogsOnFailure(t)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// controller is a CompositeController of hellos labelled test=<name>, so
// that each test's controller handles only its own parents.
type controller struct {
	Name, HookURL, Method string
	// Extra is appended to the spec (two-space indented YAML).
	Extra string
	// Hooks is appended under spec.hooks (four-space indented YAML).
	Hooks string
	// ParentSelector makes parents select their children with their own
	// spec.selector instead of a generated controller-uid label.
	ParentSelector bool
}

func (c controller) manifest() string {
	method := c.Method
	if method == "" {
		method = "InPlace"
	}
	generate := !c.ParentSelector
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
spec:
  generateSelector: %[6]v
  parentResource:
    apiVersion: example.com/v1
    resource: hellos
    labelSelector:
      matchLabels: {test: %[1]s}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: %[2]s
  - apiVersion: v1
    resource: services
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: %[3]s/sync
        timeout: 3s
%[4]s%[5]s`, c.Name, method, c.HookURL, c.Hooks, c.Extra, generate)
}

// create applies the controller and waits for its loop to run.
func (c controller) create(t *testing.T) {
	t.Helper()
	if err := stack.Apply(context.Background(), c.manifest()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
	})
	waitRunning(t, c.Name)
}

// waitRunning waits until the loop runs the current spec of the
// CompositeController name.
func waitRunning(t *testing.T, name string) {
	t.Helper()
	eventually(t, "CompositeController "+name+" Ready", func() (bool, error) {
		got, err := cc.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.ObservedGeneration == got.Generation, nil
	})
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := stack.CreateNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// createParent creates a Hello of controller ctrl.
func createParent(t *testing.T, ns, name, ctrl string, spec map[string]interface{}, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": name, "namespace": ns, "labels": map[string]interface{}{"test": ctrl}},
		"spec":     spec,
	}}
	for _, mod := range mods {
		mod(parent)
	}
	created, err := dyn.Resource(hellos).Namespace(ns).Create(context.Background(), parent, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create parent %s/%s: %v", ns, name, err)
	}
	return created
}

func getParent(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	p, err := dyn.Resource(hellos).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setParentSpec replaces a parent's spec, retrying on conflicts with the
// controller's status writes.
func setParentSpec(t *testing.T, ns, name string, spec map[string]interface{}) int64 {
	t.Helper()
	var generation int64
	eventually(t, "update of parent "+name, func() (bool, error) {
		p := getParent(t, ns, name)
		p.Object["spec"] = spec
		updated, err := dyn.Resource(hellos).Namespace(ns).Update(context.Background(), p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		generation = updated.GetGeneration()
		return true, nil
	})
	return generation
}

// waitObserved waits until the parent's status says the hook answered for
// its current generation and its children are what the hook (in its ok
// mode) asked for that spec: the status is written even when applying
// children failed, so it alone proves nothing about them. It checks that
// each ConfigMap <name>-<item> of spec.configMaps, and the Service <name>
// when spec.service, exists, is controlled by the parent and carries the
// hook's item and labels, and that the parent controls no other ConfigMap
// or Service. Data that the update strategy may leave alone (OnDelete keeps
// the old color) is the caller's to check.
func waitObserved(t *testing.T, ns, name string, generation int64) *unstructured.Unstructured {
	t.Helper()
	var parent *unstructured.Unstructured
	eventually(t, fmt.Sprintf("parent %s observedGeneration %d and its children as the hook asked", name, generation), func() (bool, error) {
		parent = getParent(t, ns, name)
		if got, _, _ := unstructured.NestedInt64(parent.Object, "status", "observedGeneration"); got != generation {
			return false, fmt.Errorf("observedGeneration %d", got)
		}
		if err := childrenAsAsked(parent); err != nil {
			return false, err
		}
		return true, nil
	})
	return parent
}

// childrenAsAsked tells how the parent's ConfigMaps and Services differ from
// what hook.py asks for its spec; nil when they do not.
func childrenAsAsked(parent *unstructured.Unstructured) error {
	ctx := context.Background()
	ns, name := parent.GetNamespace(), parent.GetName()
	items, _, _ := unstructured.NestedStringSlice(parent.Object, "spec", "configMaps")
	wantService, _, _ := unstructured.NestedBool(parent.Object, "spec", "service")
	var problems []string
	cms, err := stack.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, item := range items {
		want[name+"-"+item] = item
	}
	seen := map[string]bool{}
	for i := range cms.Items {
		cm := &cms.Items[i]
		item, wanted := want[cm.Name]
		seen[cm.Name] = true
		switch {
		case wanted && !ownedBy(cm, parent):
			problems = append(problems, fmt.Sprintf("ConfigMap %s is not controlled by the parent (%v)", cm.Name, cm.OwnerReferences))
		case wanted && (cm.Data["item"] != item || cm.Labels["app"] != name):
			problems = append(problems, fmt.Sprintf("ConfigMap %s has data %v and labels %v, not the hook's", cm.Name, cm.Data, cm.Labels))
		case wanted:
		case ownedBy(cm, parent):
			problems = append(problems, fmt.Sprintf("ConfigMap %s is controlled by the parent but the hook does not ask for it", cm.Name))
		}
	}
	for cm := range want {
		if !seen[cm] {
			problems = append(problems, fmt.Sprintf("ConfigMap %s is missing", cm))
		}
	}
	svcs, err := stack.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	serviceFound := false
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		switch {
		case wantService && svc.Name == name && ownedBy(svc, parent):
			serviceFound = true
		case wantService && svc.Name == name:
			problems = append(problems, fmt.Sprintf("Service %s is not controlled by the parent (%v)", svc.Name, svc.OwnerReferences))
		case ownedBy(svc, parent):
			problems = append(problems, fmt.Sprintf("Service %s is controlled by the parent but the hook does not ask for it", svc.Name))
		}
	}
	if wantService && !serviceFound {
		problems = append(problems, fmt.Sprintf("Service %s is missing or not the parent's", name))
	}
	if len(problems) > 0 {
		return fmt.Errorf("children of %s/%s not as the hook asked: %s", ns, name, strings.Join(problems, "; "))
	}
	return nil
}

func configMaps(t *testing.T, ns string) map[string]corev1.ConfigMap {
	t.Helper()
	list, err := stack.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, cm := range list.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		out[cm.Name] = cm
	}
	return out
}

func names(m map[string]corev1.ConfigMap) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// waitConfigMaps waits until the namespace holds exactly the named
// ConfigMaps, and returns them.
func waitConfigMaps(t *testing.T, ns string, want ...string) map[string]corev1.ConfigMap {
	t.Helper()
	sort.Strings(want)
	var got map[string]corev1.ConfigMap
	eventually(t, "ConfigMaps "+strings.Join(want, ","), func() (bool, error) {
		got = configMaps(t, ns)
		return names(got) == strings.Join(want, ","), nil
	})
	return got
}

func ownedBy(obj metav1.Object, parent metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == parent.GetUID()
}

// events returns the reasons and messages of the Events about an object.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := stack.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

func waitEvent(t *testing.T, ns, name, substring string) {
	t.Helper()
	eventually(t, "an Event on "+name+" containing "+substring, func() (bool, error) {
		for _, e := range events(t, ns, name) {
			if strings.Contains(e, substring) {
				return true, nil
			}
		}
		return false, nil
	})
}

// eventually polls cond for up to a minute; an error of cond is kept as the
// last one and polling goes on. It gives up at once when the stack is down
// (composite-apiserver or the control plane ended without being asked to).
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	stack.Eventually(t, what, time.Minute, cond)
}

// compositeMetrics reads composite-apiserver's /metrics as kube-apiserver's
// aggregator reaches it, with kube-apiserver's own front-proxy client
// certificate: issuing a new one would rewrite the files kube-apiserver
// reads, and client-go would drop its connections mid-test.
func compositeMetrics(t *testing.T) string {
	t.Helper()
	return compositeGet(t, "/metrics")
}

// compositeGet GETs path of composite-apiserver as the aggregator would,
// for an administrator.
func compositeGet(t *testing.T, path string) string {
	t.Helper()
	cert := stack.Certs.FrontProxyClient
	client, err := stack.CompositeHTTPClient(&cert)
	if err != nil {
		t.Fatal(err)
	}
	// A connection left open would stay open on the server too, and
	// count among its goroutines and heap.
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, stack.CompositeURL()+path, nil)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, data)
	}
	return string(data)
}

// restartWith runs the stack's composite-apiserver with extra flags for the
// rest of t, and as before after it. Each time it waits until kube-apiserver
// proxies to the server again: the aggregator marks the APIService
// unavailable while the server is down, and answers 503 until it has
// checked it again.
func restartWith(t *testing.T, args ...string) {
	t.Helper()
	restart := func(args ...string) error {
		ctx := context.Background()
		if err := stack.StopComposite(); err != nil {
			return err
		}
		if err := stack.StartComposite(ctx, args...); err != nil {
			return err
		}
		if err := stack.WaitAPIServiceAvailable(ctx, true); err != nil {
			return err
		}
		return stack.WaitAuthenticatedRequests(ctx)
	}
	if err := restart(args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restart(); err != nil {
			t.Error(err)
		}
	})
}

// refuse installs a ValidatingAdmissionPolicy, named after ns, that refuses
// operation on resource of group in namespace ns with message, and returns
// what lifts it (also run when t ends). kube-apiserver enforces it on its
// own resources, composite-apiserver on ours.
func refuse(t *testing.T, ns, group, resource, operation, message string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [%[2]q]
      apiVersions: ["*"]
      operations: [%[4]s]
      resources: [%[3]s]
  validations:
  - expression: "false"
    message: %[5]q
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[1]s}
`, ns, group, resource, operation, message)
	if err := stack.Apply(ctx, policy); err != nil {
		t.Fatal(err)
	}
	lift = func() {
		_ = stack.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, ns, metav1.DeleteOptions{})
		_ = stack.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	return lift
}
