package loop

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/util/wait"
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
	eventually(t, "CompositeController "+c.Name+" Ready", func() (bool, error) {
		got, err := cc.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), c.Name, metav1.GetOptions{})
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
func createParent(t *testing.T, ns, name, ctrl string, spec map[string]interface{}) *unstructured.Unstructured {
	t.Helper()
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": name, "namespace": ns, "labels": map[string]interface{}{"test": ctrl}},
		"spec":     spec,
	}}
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
// its current generation.
func waitObserved(t *testing.T, ns, name string, generation int64) *unstructured.Unstructured {
	t.Helper()
	var parent *unstructured.Unstructured
	eventually(t, fmt.Sprintf("parent %s observedGeneration %d", name, generation), func() (bool, error) {
		parent = getParent(t, ns, name)
		got, _, _ := unstructured.NestedInt64(parent.Object, "status", "observedGeneration")
		return got == generation, nil
	})
	return parent
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

// eventually polls cond for up to a minute.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
	}
}
