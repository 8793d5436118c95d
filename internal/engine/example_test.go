package engine_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// One sync of one parent, computed and not executed: the hook is called,
// its answer checked, and the plan says what would make the cluster match
// it. The loop hands the plan to internal/apply; /sync shows it as a dry run.
// Here a Hello once had the ConfigMaps greeting and old; its hook now
// answers greeting in French and a new ConfigMap lang.
func ExampleCompute() {
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{
				ResourceRule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
				UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace},
			}},
			Hooks: &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{}},
		},
	}
	// No cluster to ask for kinds: the resolver a /sync preview uses.
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		panic(err)
	}

	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "world", "namespace": "default", "uid": "1"},
		"spec": map[string]interface{}{
			"greeting": "bonjour",
			"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "world"}},
		},
	}}
	// The children as the API server stores them after the last sync's
	// apply (internal/apply's, with the parent's controller reference): their
	// fields managed by the controller.
	var observed []*unstructured.Unstructured
	for _, name := range []string{"greeting", "old"} {
		applied := configMap(name, "hello")
		applied.SetOwnerReferences(engine.ChildOwnerReferences(parent, applied))
		child, err := fieldowner.WouldStore(managedfields.NewDeducedTypeConverter(), nil, applied, def.FieldManager)
		if err != nil {
			panic(err)
		}
		observed = append(observed, child)
	}
	selector, err := engine.ParentSelector(def, parent)
	if err != nil {
		panic(err)
	}

	hook := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		greeting, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "greeting")
		return &hookapi.SyncHookResponse{
			Status:   map[string]interface{}{"greeting": greeting},
			Children: []*unstructured.Unstructured{configMap("greeting", greeting), configMap("lang", "fr")},
		}, nil
	})
	plan, err := engine.Compute(context.Background(), engine.Input{
		Definition: def,
		Parent:     parent,
		// Which observed objects are the parent's: here all of them.
		Children: engine.Claim(parent, selector, observed, def.AdoptsOrphans()),
		Hooks:    engine.Hooks{Sync: engine.InProcess(hook)},
		Resolver: definition.GuessingResolver(),
	})
	if err != nil {
		panic(err)
	}
	// Items come sorted, so the plan prints the same every time.
	for _, item := range plan.Items {
		fmt.Println(item.Action, item.GVR.Resource, namespacedName(item))
		for _, line := range item.Diff {
			fmt.Println("   ", line)
		}
	}
	fmt.Println("status:", plan.Response.Status)
	// Output:
	// Update configmaps default/greeting
	//     data.greeting: "hello" -> "bonjour"
	// Create configmaps default/lang
	// Delete configmaps default/old
	// status: map[greeting:bonjour]
}

// configMap is a ConfigMap the hello hook answers: labelled with the
// parent's selector, which the engine checks every desired child matches.
func configMap(name, greeting string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "namespace": "default", "labels": map[string]interface{}{"app": "world"}},
		"data":     map[string]interface{}{"greeting": greeting},
	}}
}

// namespacedName names an item's child by what it is to become or, for a
// delete, what it is.
func namespacedName(item engine.Item) string {
	obj := item.Desired
	if obj == nil {
		obj = item.Observed
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
