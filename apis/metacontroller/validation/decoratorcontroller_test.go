package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// validDecoratorController passes validation without warnings, with most
// optional fields set, so that each case can break one thing.
func validDecoratorController() *metacontroller.DecoratorController {
	return &metacontroller.DecoratorController{
		ObjectMeta: metav1.ObjectMeta{Name: "service-per-pod", ResourceVersion: "1"},
		Spec: metacontroller.DecoratorControllerSpec{
			Resources: []metacontroller.DecoratorControllerResourceRule{{
				ResourceRule:       metacontroller.ResourceRule{APIVersion: "apps/v1", Resource: "statefulsets"},
				LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				AnnotationSelector: &metacontroller.AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "service-per-pod-label", Operator: metav1.LabelSelectorOpExists}}},
			}},
			Attachments: []metacontroller.DecoratorControllerAttachmentRule{{
				ResourceRule:   metacontroller.ResourceRule{APIVersion: "v1", Resource: "services"},
				UpdateStrategy: &metacontroller.DecoratorControllerAttachmentUpdateStrategy{Method: metacontroller.ChildUpdateInPlace},
			}},
			Hooks: &metacontroller.DecoratorControllerHooks{
				Sync:     &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("http://hooks.example.com/sync")}},
				Finalize: &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr("http://hooks.example.com/finalize")}},
			},
		},
	}
}

func TestValidateDecoratorController(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*metacontroller.DecoratorController)
		want   []wantErr
	}{
		{"valid", func(*metacontroller.DecoratorController) {}, nil},
		{"no resources", func(dc *metacontroller.DecoratorController) { dc.Spec.Resources = nil }, []wantErr{req("spec.resources")}},
		{"a resource of a malformed apiVersion", func(dc *metacontroller.DecoratorController) { dc.Spec.Resources[0].APIVersion = "apps/v1/x" }, []wantErr{inv("spec.resources[0].apiVersion")}},
		{"a bad label selector", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Resources[0].LabelSelector.MatchLabels = map[string]string{"a b": "c"}
		}, []wantErr{inv("spec.resources[0].labelSelector.matchLabels")}},
		{"an annotation selector no label selector can be", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Resources[0].AnnotationSelector = &metacontroller.AnnotationSelector{
				MatchAnnotations: map[string]string{"owner": "not a label value"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}},
			}
		}, []wantErr{inv("spec.resources[0].annotationSelector.matchAnnotations"), inv("spec.resources[0].annotationSelector.matchExpressions[0].operator")}},
		{"a resource listed twice", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Resources = append(dc.Spec.Resources, dc.Spec.Resources[0])
			dc.Spec.Resources[1].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}, []wantErr{dup("spec.resources[1]")}},
		{"a resource listed twice in two versions of its group", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Resources = append(dc.Spec.Resources, dc.Spec.Resources[0], dc.Spec.Resources[0])
			dc.Spec.Resources[1].ResourceRule = metacontroller.ResourceRule{APIVersion: "v1", Resource: "statefulsets"}
			dc.Spec.Resources[2].ResourceRule = metacontroller.ResourceRule{APIVersion: "apps/v1beta2", Resource: "statefulsets"}
		}, []wantErr{dup("spec.resources[2]")}},
		{"an attachment of this server's group", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Attachments[0].APIVersion = "metacontroller.k8s.io/v1alpha1"
			dc.Spec.Attachments[0].Resource = "compositecontrollers"
		}, []wantErr{forb("spec.attachments[0].apiVersion")}},
		{"an unknown update method", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Attachments[0].UpdateStrategy.Method = "Sometimes"
		}, []wantErr{nsup("spec.attachments[0].updateStrategy.method")}},
		{"no hooks", func(dc *metacontroller.DecoratorController) { dc.Spec.Hooks = nil }, []wantErr{req("spec.hooks")}},
		{"an unknown ownChildWrites", func(dc *metacontroller.DecoratorController) {
			dc.Spec.OwnChildWrites = ptr(metacontroller.OwnChildWritesPolicy("Sometimes"))
		}, []wantErr{nsup("spec.ownChildWrites")}},
		{"an unknown ownStatusWrites", func(dc *metacontroller.DecoratorController) {
			dc.Spec.OwnStatusWrites = ptr(metacontroller.OwnStatusWritesPolicy("Never"))
		}, []wantErr{nsup("spec.ownStatusWrites")}},
		{"no sync hook", func(dc *metacontroller.DecoratorController) { dc.Spec.Hooks.Sync = nil }, []wantErr{req("spec.hooks.sync")}},
		{"a hook with url and a bad scheme", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Hooks.Finalize.Webhook.URL = ptr("ftp://hooks.example.com/finalize")
		}, []wantErr{inv("spec.hooks.finalize.webhook.url")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := validDecoratorController()
			tc.modify(dc)
			assertErrors(t, ValidateDecoratorController(dc, nil), tc.want)
			old := validDecoratorController()
			assertErrors(t, ValidateDecoratorControllerUpdate(dc, old, nil), tc.want)
		})
	}
}

func TestDecoratorWarnings(t *testing.T) {
	if w := DecoratorWarnings(validDecoratorController()); len(w) != 0 {
		t.Fatalf("warnings on a valid DecoratorController: %q", w)
	}
	for _, tc := range []struct {
		name   string
		modify func(*metacontroller.DecoratorController)
		want   string
	}{
		{"an attachment listed twice", func(dc *metacontroller.DecoratorController) {
			dc.Spec.Attachments = append(dc.Spec.Attachments, dc.Spec.Attachments[0])
		}, "spec.attachments[1]: "},
		{"a short resync period", func(dc *metacontroller.DecoratorController) { dc.Spec.ResyncPeriodSeconds = ptr(int32(0)) }, "spec.resyncPeriodSeconds: "},
		{"a finalizer name too long", func(dc *metacontroller.DecoratorController) { dc.Name = strings.Repeat("d", 60) }, "metadata.name: the finalize hook's finalizer metacontroller.io/decoratorcontroller-"},
		{"a hook without a webhook", func(dc *metacontroller.DecoratorController) { dc.Spec.Hooks.Customize = &metacontroller.Hook{} }, "spec.hooks.customize: has no webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := validDecoratorController()
			tc.modify(dc)
			w := DecoratorWarnings(dc)
			if len(w) != 1 || !strings.HasPrefix(w[0], tc.want) {
				t.Errorf("warnings %q, want one starting %q", w, tc.want)
			}
			if errs := ValidateDecoratorController(dc, nil); len(errs) != 0 {
				t.Errorf("a warning is no error: %v", errs)
			}
		})
	}
}

func TestValidateDecoratorControllerStatusUpdate(t *testing.T) {
	dc := validDecoratorController()
	dc.Status.Objects = -1
	dc.Status.Conditions = []metav1.Condition{{Type: "Ready"}}
	assertErrors(t, ValidateDecoratorControllerStatusUpdate(dc, validDecoratorController()), []wantErr{
		inv("status.objects"), req("status.conditions[0].status"), req("status.conditions[0].lastTransitionTime"),
		req("status.conditions[0].reason"),
	})
}
