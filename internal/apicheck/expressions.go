// Package apicheck gives the API's validation the compilers the server
// runs (validation.Expressions), so that admission accepts exactly what
// the patch engine and the rollout driver run, while apis/ imports nothing
// of internal/, and neither the patches nor the rollout import the other.
package apicheck

import (
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// Expressions is validation.Expressions with the server's compilers.
type Expressions struct{}

// CheckCondition compiles an enabledIf expression as a new one.
func (Expressions) CheckCondition(expr string) error { return variables.CheckCondition(expr) }

// CheckChildVariable checks that path names a variable of a child's patch.
func (Expressions) CheckChildVariable(path string) error {
	return variables.CheckPath(path, variables.ChildScope)
}

// CheckTemplate parses a valueFrom.template.
func (Expressions) CheckTemplate(text string) error {
	_, err := variables.ParseTemplate(text)
	return err
}

// CheckHealthCondition compiles a rollout's health condition with the
// compiler the loop runs it with.
func (Expressions) CheckHealthCondition(expr string) error { return rollout.CheckHealth(expr) }

// EstimateHealthCondition compiles a health condition with the parent
// typed by its schema and estimates its cost, as CRD validation rules are.
func (Expressions) EstimateHealthCondition(expr string, parent *spec.Schema) (max, typical uint64, dynamic bool, err error) {
	c, err := rollout.EstimateHealth(expr, parent)
	return c.Max, c.Typical, c.Dynamic, err
}
