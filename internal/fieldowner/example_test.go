package fieldowner_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
)

// A controller applies a child, then asks before its next apply whether
// that apply would change anything. A converged child needs no request;
// a hook that changes a value, or stops returning a field, does.
func ExampleCompare() {
	tc := managedfields.NewDeducedTypeConverter() // a live cluster's schema: Schemas
	const manager = "metacontroller.k8s.io/hello"
	desired := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "hello", "namespace": "default"},
		"data":     map[string]interface{}{"greeting": "hello", "lang": "en"},
	}}
	// What the API server would store for the first apply: the child as
	// the loop observes it afterwards, managedFields included.
	live, err := fieldowner.WouldStore(tc, nil, desired, manager)
	if err != nil {
		panic(err)
	}

	same, _ := fieldowner.Compare(tc, live, desired, manager)
	fmt.Println("converged:", !same.Changed)

	next := desired.DeepCopy()
	_ = unstructured.SetNestedField(next.Object, "bonjour", "data", "greeting")
	unstructured.RemoveNestedField(next.Object, "data", "lang")
	changed, _ := fieldowner.Compare(tc, live, next, manager)
	fmt.Println("changed:", changed.Changed)
	for _, line := range changed.Lines {
		fmt.Println(line)
	}
	// Output:
	// converged: true
	// changed: true
	// - data.lang: "en"
	// data.greeting: "hello" -> "bonjour"
}
