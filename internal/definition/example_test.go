package definition_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// A CompositeController, as written, is compiled once per spec into the
// Definition every other package works from: resources resolved to kinds
// (here by a RESTMapper, as the target cluster's discovery does), hooks
// resolved, and the names the loop writes under.
func ExampleCompile() {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Hello"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)

	url := "http://hello-hook.default/sync"
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Generation: 1},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{
				ResourceRule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
				UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace},
			}},
			Hooks: &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}}},
		},
	}
	def, err := definition.Compile(cc, definition.RESTMapperResolver(mapper))
	if err != nil {
		panic(err)
	}
	fmt.Println("parent:", def.Parent.Kind.Kind, def.Parent.GVR.Resource, "namespaced:", def.Parent.Namespaced)
	for _, gvr := range def.ChildGVRs() {
		fmt.Println("child:", gvr.Resource, def.UpdateMethod(gvr))
	}
	fmt.Println("applies as:", def.FieldManager)
	// Output:
	// parent: Hello hellos namespaced: true
	// child: configmaps InPlace
	// applies as: metacontroller.k8s.io/hello
}
