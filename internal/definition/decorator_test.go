package definition

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func serviceDecorator() *v1alpha1.DecoratorController {
	dc := &v1alpha1.DecoratorController{}
	dc.Name = "service-per-pod"
	dc.Spec.Resources = []v1alpha1.DecoratorControllerResourceRule{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "apps/v1", Resource: "statefulsets"},
			AnnotationSelector: &v1alpha1.AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "service-per-pod-label", Operator: metav1.LabelSelectorOpExists}}}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "pods"},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, IgnoreStatusChanges: new(true)},
	}
	dc.Spec.Attachments = []v1alpha1.DecoratorControllerAttachmentRule{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "services"},
			UpdateStrategy: &v1alpha1.DecoratorControllerAttachmentUpdateStrategy{Method: v1alpha1.ChildUpdateRollingInPlace}},
	}
	dc.Spec.Hooks = &v1alpha1.DecoratorControllerHooks{
		Sync:     &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: new("http://hook/sync")}},
		Finalize: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: new("http://hook/finalize")}},
	}
	return dc
}

// A DecoratorController compiles into the Definition a CompositeController
// does: one parent view per resource with its own selectors, attachments as
// children claimed by annotation, Metacontroller's finalizer, and the
// rights of every resource.
func TestCompile(t *testing.T) {
	def, err := Compile(serviceDecorator(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.Finalizer != "metacontroller.io/decoratorcontroller-service-per-pod" || def.ChildAnnotation != DecoratorAnnotation {
		t.Errorf("finalizer %q, child annotation %q", def.Finalizer, def.ChildAnnotation)
	}
	if len(def.Children) != 1 || def.Children[0].Method != v1alpha1.ChildUpdateInPlace || def.Rolling {
		t.Errorf("children %+v rolling %v: a decorator's RollingInPlace is InPlace", def.Children, def.Rolling)
	}
	if def.Hooks.Sync == nil || def.Hooks.Finalize == nil || def.Hooks.Customize != nil {
		t.Errorf("hooks %+v", def.Hooks)
	}
	views := def.Parents()
	if len(views) != 2 || views[0].Parent.GVR.Resource != "statefulsets" || views[1].Parent.GVR.Resource != "pods" || !views[1].IgnoreStatusChanges || views[0].IgnoreStatusChanges {
		t.Fatalf("views %+v", views)
	}
	obj := func(labels, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	if views[0].Selects(obj(nil, nil)) || !views[0].Selects(obj(nil, map[string]string{"service-per-pod-label": "x"})) {
		t.Errorf("the statefulsets view selects by annotation")
	}
	if views[1].Selects(obj(nil, nil)) || !views[1].Selects(obj(map[string]string{"app": "web"}, nil)) {
		t.Errorf("the pods view selects by label")
	}
	for _, r := range views[1].Rights {
		if r.Resource == "statefulsets" {
			t.Errorf("the pods view has the right %s of the statefulsets view", r)
		}
	}
	var rights []string
	for _, r := range def.Rights {
		rights = append(rights, r.String())
	}
	for _, want := range []string{"patch statefulsets.apps", "update pods/status", "delete services", "create events"} {
		if !strings.Contains(strings.Join(rights, ","), want) {
			t.Errorf("rights %v lack %q", rights, want)
		}
	}
	twice := serviceDecorator()
	twice.Spec.Resources = append(twice.Spec.Resources, twice.Spec.Resources[0])
	twice.Spec.Resources[2].APIVersion = "apps/v1beta2"
	if _, err := Compile(twice, nil); err == nil || !strings.Contains(err.Error(), "spec.resources[2]: Duplicate value") {
		t.Errorf("statefulsets.apps listed twice compiled (error %v): its two views would share one queue key", err)
	}
	annotated := obj(nil, map[string]string{DecoratorAnnotation: "service-per-pod"})
	if !def.OwnsChild(annotated) || def.OwnsChild(obj(nil, map[string]string{DecoratorAnnotation: "other"})) {
		t.Errorf("OwnsChild goes by the annotation")
	}
}
