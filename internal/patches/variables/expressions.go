package variables

import (
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// Expressions is the compiler of this package as validation takes it
// (validation.Expressions): the API's validation accepts exactly what the
// patch engine runs, without apis/ importing pkg/.
type Expressions struct{}

// CheckCondition compiles an enabledIf expression as a new one.
func (Expressions) CheckCondition(expr string) error { return CheckCondition(expr) }

// CheckChildVariable checks that path names a variable of a child's patch.
func (Expressions) CheckChildVariable(path string) error { return CheckPath(path, ChildScope) }

// CheckTemplate parses a valueFrom.template.
func (Expressions) CheckTemplate(text string) error {
	_, err := ParseTemplate(text)
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
