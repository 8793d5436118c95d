// Package definitiontest helps tests that need a compiled controller.
package definitiontest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// Compile compiles cc without discovery, as a preview without a cluster
// does, and fails the test when cc can't compile.
func Compile(t testing.TB, cc *v1alpha1.CompositeController) *definition.Definition {
	t.Helper()
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// ConfigMapController is a controller of hellos.example.com whose children
// are ConfigMaps and whose sync hook is the webhook at hookURL.
func ConfigMapController(name string, uid types.UID, hookURL string) *v1alpha1.CompositeController {
	return &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Hooks:          &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(hookURL)}}},
		},
	}
}
