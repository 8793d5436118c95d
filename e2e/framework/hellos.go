package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// HelloController is a CompositeController of the Hellos labelled
// test=<Name>, so that each test's controller handles only its own parents,
// with ConfigMap children (updated by Method, InPlace when empty) and
// Service children, its sync hook at HookURL/sync as e2e/hooks/hook.py
// answers it.
type HelloController struct {
	Name, HookURL, Method string
	// SelectAll selects every Hello, not only those labelled test=<Name>.
	SelectAll bool
	// Timeout is the sync hook's timeout, as time.ParseDuration reads it:
	// 3s when empty.
	Timeout string
	// ParentSelector makes parents select their children with their own
	// spec.selector instead of a generated controller-uid label.
	ParentSelector bool
	// Spec, when set, edits the spec last: the hooks, identity or policies
	// a test adds, checked by the compiler. Hooks.Sync is set, so it may be
	// added to.
	Spec func(*acv1alpha1.CompositeControllerSpecApplyConfiguration)
}

// ApplyConfiguration is the CompositeController.
func (c HelloController) ApplyConfiguration() *acv1alpha1.CompositeControllerApplyConfiguration {
	method, timeout := c.Method, c.Timeout
	if method == "" {
		method = string(v1alpha1.ChildUpdateInPlace)
	}
	if timeout == "" {
		timeout = "3s"
	}
	parent := acv1alpha1.CompositeControllerParentResourceRule().WithAPIVersion("example.com/v1").WithResource("hellos")
	if !c.SelectAll {
		parent.WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"test": c.Name}))
	}
	child := func(resource string, method v1alpha1.ChildUpdateMethod) *acv1alpha1.CompositeControllerChildResourceRuleApplyConfiguration {
		return acv1alpha1.CompositeControllerChildResourceRule().WithAPIVersion("v1").WithResource(resource).
			WithUpdateStrategy(acv1alpha1.CompositeControllerChildUpdateStrategy().WithMethod(method))
	}
	spec := acv1alpha1.CompositeControllerSpec().
		WithGenerateSelector(!c.ParentSelector).
		WithParentResource(parent).
		WithChildResources(child("configmaps", v1alpha1.ChildUpdateMethod(method)), child("services", v1alpha1.ChildUpdateInPlace)).
		WithHooks(acv1alpha1.CompositeControllerHooks().WithSync(HookAt(c.HookURL+"/sync", parseTimeout(timeout))))
	if c.Spec != nil {
		c.Spec(spec)
	}
	return acv1alpha1.CompositeController(c.Name).WithSpec(spec)
}

// Manifest is the CompositeController as YAML to apply.
func (c HelloController) Manifest() string {
	return manifest(c.ApplyConfiguration())
}

// Create applies the controller on the suite's stack, and waits for its
// loop to run; it is deleted when t ends.
func (c HelloController) Create(t testing.TB, s *Suite) {
	t.Helper()
	if err := s.Apply(context.Background(), c.Manifest()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
	})
	s.WaitRunning(t, c.Name)
}

// WaitRunning waits until the loop runs the current spec of the
// CompositeController name.
func (s *Suite) WaitRunning(t testing.TB, name string) {
	t.Helper()
	s.Eventually(t, "CompositeController "+name+" Ready", func() (bool, error) {
		got, err := s.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.ObservedGeneration == got.Generation, nil
	})
}

// SetHelloSpec replaces a parent's spec, retrying on conflicts with the
// controller's status writes.
func (s *Suite) SetHelloSpec(t testing.TB, ns, name string, spec map[string]interface{}) int64 {
	t.Helper()
	var generation int64
	s.Eventually(t, "update of parent "+name, func() (bool, error) {
		p := s.GetHello(t, ns, name)
		p.Object["spec"] = spec
		updated, err := s.Dynamic.Resource(Hellos).Namespace(ns).Update(context.Background(), p, metav1.UpdateOptions{})
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

// WaitObserved waits until the parent's status says the hook answered for
// its current generation and its children are what the hook (in its ok
// mode) asked for that spec: the status is written even when applying
// children failed, so it alone proves nothing about them. It checks that
// each ConfigMap <name>-<item> of spec.configMaps, and the Service <name>
// when spec.service, exists, is controlled by the parent and carries the
// hook's item and labels, and that the parent controls no other ConfigMap
// or Service. Data that the update strategy may leave alone (OnDelete keeps
// the old color) is the caller's to check.
func (s *Suite) WaitObserved(t testing.TB, ns, name string, generation int64) *unstructured.Unstructured {
	t.Helper()
	var parent *unstructured.Unstructured
	s.Eventually(t, fmt.Sprintf("parent %s observedGeneration %d and its children as the hook asked", name, generation), func() (bool, error) {
		parent = s.GetHello(t, ns, name)
		if got, _, _ := unstructured.NestedInt64(parent.Object, "status", "observedGeneration"); got != generation {
			return false, fmt.Errorf("observedGeneration %d", got)
		}
		if err := s.ChildrenAsAsked(parent); err != nil {
			return false, err
		}
		return true, nil
	})
	return parent
}

// ChildrenAsAsked tells how the parent's ConfigMaps and Services differ from
// what hook.py asks for its spec; nil when they do not.
func (s *Suite) ChildrenAsAsked(parent *unstructured.Unstructured) error {
	ctx := context.Background()
	ns, name := parent.GetNamespace(), parent.GetName()
	items, _, _ := unstructured.NestedStringSlice(parent.Object, "spec", "configMaps")
	wantService, _, _ := unstructured.NestedBool(parent.Object, "spec", "service")
	var problems []string
	cms, err := s.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
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
		case wanted && !OwnedBy(cm, parent):
			problems = append(problems, fmt.Sprintf("ConfigMap %s is not controlled by the parent (%v)", cm.Name, cm.OwnerReferences))
		case wanted && (cm.Data["item"] != item || cm.Labels["app"] != name):
			problems = append(problems, fmt.Sprintf("ConfigMap %s has data %v and labels %v, not the hook's", cm.Name, cm.Data, cm.Labels))
		case wanted:
		case OwnedBy(cm, parent):
			problems = append(problems, fmt.Sprintf("ConfigMap %s is controlled by the parent but the hook does not ask for it", cm.Name))
		}
	}
	for cm := range want {
		if !seen[cm] {
			problems = append(problems, fmt.Sprintf("ConfigMap %s is missing", cm))
		}
	}
	svcs, err := s.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	serviceFound := false
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		switch {
		case wantService && svc.Name == name && OwnedBy(svc, parent):
			serviceFound = true
		case wantService && svc.Name == name:
			problems = append(problems, fmt.Sprintf("Service %s is not controlled by the parent (%v)", svc.Name, svc.OwnerReferences))
		case OwnedBy(svc, parent):
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

// ConfigMaps are the ConfigMaps of namespace ns by name, but for
// kube-root-ca.crt, which every namespace has.
func (s *Suite) ConfigMaps(t testing.TB, ns string) map[string]corev1.ConfigMap {
	t.Helper()
	list, err := s.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
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

// Names are the sorted keys of m, comma-separated.
func Names(m map[string]corev1.ConfigMap) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// WaitConfigMaps waits until the namespace holds exactly the named
// ConfigMaps, and returns them.
func (s *Suite) WaitConfigMaps(t testing.TB, ns string, want ...string) map[string]corev1.ConfigMap {
	t.Helper()
	sort.Strings(want)
	var got map[string]corev1.ConfigMap
	s.Eventually(t, "ConfigMaps "+strings.Join(want, ","), func() (bool, error) {
		got = s.ConfigMaps(t, ns)
		return Names(got) == strings.Join(want, ","), nil
	})
	return got
}

// OwnedBy tells whether parent is obj's controller.
func OwnedBy(obj metav1.Object, parent metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == parent.GetUID()
}

// HelloSpec is the spec of a Hello that hook.py answers with a ConfigMap
// <parent>-<item> for each of configMaps, carrying color.
func HelloSpec(color string, configMaps ...string) map[string]interface{} {
	items := make([]interface{}, len(configMaps))
	for i, c := range configMaps {
		items[i] = c
	}
	return map[string]interface{}{"color": color, "configMaps": items}
}

// LiveSync POSTs a SyncRequest without dryRun for parent ns/name through
// kube-apiserver, as kubectl would.
func (s *Suite) LiveSync(ctx context.Context, controller, ns, name string) (*v1alpha1.SyncRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return s.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, controller,
		&v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: name}}},
		metav1.CreateOptions{})
}
