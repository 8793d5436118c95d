package parentloop

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// beforeSync, nil in the shipped binary, is called before each sync of a
// parent: a test build (-tags e2einject) sets it to inject faults.
var beforeSync func(parent *unstructured.Unstructured)
