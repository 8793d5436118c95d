//go:build e2einject

package parentloop

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// panicAnnotation, "true" on a parent, makes a test build's loop panic on
// each sync of it: e2e/rollout proves that one controller's panic never
// takes the server down. Only a build with -tags e2einject has it.
const panicAnnotation = "e2e.composite.metacontroller.k8s.io/panic"

func init() {
	beforeSync = func(parent *unstructured.Unstructured) {
		if parent.GetAnnotations()[panicAnnotation] == "true" {
			panic(fmt.Sprintf("e2e: panic injected by %s on %s/%s", panicAnnotation, parent.GetNamespace(), parent.GetName()))
		}
	}
}
