// Package definitiontest helps tests that need a compiled controller.
package definitiontest

import (
	"testing"

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
