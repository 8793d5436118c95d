package cluster

import (
	"context"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// TestFleetPreviewOfADecoratorController: a DecoratorController is
// previewed across what it decorates as a CompositeController is across
// its parents, resource by resource. Its Hellos and its annotated
// ConfigMap are previewed, each with the attachment the hook would create
// for it (none written); a ConfigMap its annotation selector leaves out is
// not; pages of one follow every resource and name each object once; and
// a proposal that drops the ConfigMaps from its resources previews the
// Hellos only, as a field of spec.decoratorController.
func TestFleetPreviewOfADecoratorController(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hook := setUpHellos(t)
	const ns, name = "decorator-fleet", "decorator-fleet"
	suite.MustCreateNamespace(t, ns)
	manifest := framework.DecoratorFixture{Name: name, HookURL: hook.URL, SelectBy: "fleet", NoFinalize: true}.Manifest()
	suite.MustApply(t, manifest)
	t.Cleanup(func() { _, _, _ = suite.Kubectl(context.Background(), "delete", "dec", name, "--ignore-not-found") })
	dyn, err := dynamic.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]interface{}{"fleet": name}
	for _, h := range []string{"h1", "h2", "h3"} {
		if _, err := dyn.Resource(hellosGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Hello",
			"metadata": map[string]interface{}{"name": h, "namespace": ns, "labels": labels, "annotations": map[string]interface{}{"attach": "a"}},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for cm, ann := range map[string]map[string]string{"c1": {"attach": "b"}, "c2": nil} {
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: cm, Labels: map[string]string{"fleet": name}, Annotations: ann}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client, err := clientset.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	preview := func(spec *v1alpha1.DecoratorControllerSpec, limit int64) (map[string]v1alpha1.FleetPreviewParent, int) {
		t.Helper()
		got := map[string]v1alpha1.FleetPreviewParent{}
		req := &v1alpha1.FleetPreview{Spec: v1alpha1.FleetPreviewSpec{DecoratorController: spec, Limit: limit}}
		pages := 0
		for {
			answer, err := client.MetacontrollerV1alpha1().DecoratorControllers().Preview(ctx, name, req, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("preview, page %d: %v", pages+1, err)
			}
			pages++
			for _, p := range answer.Status.Parents {
				key := p.Namespace + "/" + p.Name
				if _, dup := got[key]; dup {
					t.Errorf("%s previewed twice", key)
				}
				got[key] = p
			}
			if answer.Status.Continue == "" {
				return got, pages
			}
			req.Spec.Continue = answer.Status.Continue
		}
	}
	names := func(m map[string]v1alpha1.FleetPreviewParent) string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}

	all, _ := preview(nil, 0)
	if want := ns + "/c1 " + ns + "/h1 " + ns + "/h2 " + ns + "/h3"; names(all) != want {
		t.Errorf("previewed %q, want %q: the Hellos and the annotated ConfigMap", names(all), want)
	}
	for key, p := range all {
		if p.Error != "" || p.Counts.Create != 1 {
			t.Errorf("%s: %d creates, error %q; want the one attachment the hook asks for", key, p.Counts.Create, p.Error)
		}
	}
	paged, pages := preview(nil, 1)
	if names(paged) != names(all) || pages < 4 {
		t.Errorf("pages of one: %d pages naming %q, want at least 4 naming %q", pages, names(paged), names(all))
	}
	if list, err := suite.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("a preview wrote attachments: %v %v", list, err)
	}

	// The plugin previews it by TYPE/NAME, as kubectl names it.
	r := kubectlComposite(t, "", "preview", "--all-parents", "dec/"+name)
	r.want(t, 1, "a DecoratorController whose attachments do not exist yet")
	for _, key := range []string{"c1", "h1", "h2", "h3"} {
		if !strings.Contains(r.stdout, ns+"/"+key) {
			t.Errorf("the plugin's table has no row for %s/%s:\n%s", ns, key, r.stdout)
		}
	}
	if strings.Contains(r.stdout, ns+"/c2") {
		t.Errorf("the plugin's table has the ConfigMap the annotation selector leaves out:\n%s", r.stdout)
	}

	stored, err := client.MetacontrollerV1alpha1().DecoratorControllers().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proposed := stored.Spec.DeepCopy()
	proposed.Resources = proposed.Resources[:1]
	if got, _ := preview(proposed, 0); names(got) != ns+"/h1 "+ns+"/h2 "+ns+"/h3" {
		t.Errorf("a proposal of the Hellos alone previewed %q", names(got))
	}
	bad := stored.Spec.DeepCopy()
	bad.Resources = nil
	_, err = client.MetacontrollerV1alpha1().DecoratorControllers().Preview(ctx, name, &v1alpha1.FleetPreview{Spec: v1alpha1.FleetPreviewSpec{DecoratorController: bad}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.decoratorController.resources") {
		t.Errorf("a proposal without resources: %v, want a field error at spec.decoratorController.resources", err)
	}
}
