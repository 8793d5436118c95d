package rollout

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// envs are the CEL environments of a rollout's health condition:
// Kubernetes' base environment with the parent declared, dynamic (its
// shape is the parent resource's).
var envs = sync.OnceValues(func() (*environment.EnvSet, error) {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("parent", cel.DynType)},
	})
})

// Health is a compiled health condition.
type Health struct {
	expr    string
	program cel.Program
}

// CheckHealth compiles expr as a new health condition, as validation does.
func CheckHealth(expr string) error {
	_, err := compileHealth(expr, false)
	return err
}

// CompileHealth compiles a stored health condition for evaluation.
func CompileHealth(expr string) (*Health, error) {
	return compileHealth(expr, true)
}

func compileHealth(expr string, stored bool) (*Health, error) {
	set, err := envs()
	if err != nil {
		return nil, err
	}
	env := set.NewExpressionsEnv()
	if stored {
		env = set.StoredExpressionsEnv()
	}
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("does not compile: %w", issues.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to a bool, not %s", t)
	}
	program, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, err
	}
	return &Health{expr: expr, program: program}, nil
}

// Expr is the condition as written.
func (h *Health) Expr() string { return h.expr }

// Healthy evaluates the condition over the parent.
func (h *Health) Healthy(ctx context.Context, parent *unstructured.Unstructured) (bool, error) {
	out, _, err := h.program.ContextEval(ctx, map[string]interface{}{"parent": parent.Object})
	if err != nil {
		return false, fmt.Errorf("health condition %q: %w", h.expr, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("health condition %q gave %v, not a bool", h.expr, out.Value())
	}
	return b, nil
}

// DefaultHealthy is the health of a parent without a condition, by
// Metacontroller's convention: a Ready condition in its status, when it has
// one, must be "True"; any other parent is healthy once synced (the
// caller's part).
func DefaultHealthy(parent *unstructured.Unstructured) (healthy, hasReady bool) {
	conditions, _, _ := unstructured.NestedSlice(parent.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]interface{})
		if ok && m["type"] == "Ready" {
			return m["status"] == "True", true
		}
	}
	return true, false
}
