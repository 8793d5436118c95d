package variables

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// builtinType is the CEL type of the builtin variable in enabledIf: its
// fields are checked when an expression is compiled, so that a misspelt
// variable is an error when the CompositeController is written, not on
// every sync. builtin.parent.spec is dynamic: its shape is the parent
// resource's.
var builtinType = func() *apiservercel.DeclType {
	field := func(name string, t *apiservercel.DeclType) *apiservercel.DeclField {
		return apiservercel.NewDeclField(name, t, true, nil, nil)
	}
	object := func(name string, fs ...*apiservercel.DeclField) *apiservercel.DeclType {
		m := make(map[string]*apiservercel.DeclField, len(fs))
		for _, f := range fs {
			m[f.Name] = f
		}
		return apiservercel.NewObjectType(name, m)
	}
	stringMap := apiservercel.NewMapType(apiservercel.StringType, apiservercel.StringType, -1)
	return object("composite.builtin",
		field("controller", object("composite.builtin.controller",
			field("name", apiservercel.StringType),
			field("generation", apiservercel.IntType),
		)),
		field("parent", object("composite.builtin.parent",
			field("apiVersion", apiservercel.StringType),
			field("kind", apiservercel.StringType),
			field("metadata", object("composite.builtin.parent.metadata",
				field("name", apiservercel.StringType),
				field("namespace", apiservercel.StringType),
				field("labels", stringMap),
				field("annotations", stringMap),
			)),
			field("spec", apiservercel.DynType),
		)),
	)
}()

// envs are the CEL environments of enabledIf: Kubernetes' base environment
// (its libraries and cost limits) with the builtin variable declared.
var envs = sync.OnceValues(func() (*environment.EnvSet, error) {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(Builtin, builtinType.CelType())},
		DeclTypes:         []*apiservercel.DeclType{builtinType},
	})
})

// CheckCondition compiles an enabledIf expression as a new one, the way
// Kubernetes checks a CEL expression being written: it must compile against
// the builtin variables and give a bool.
func CheckCondition(expr string) error {
	set, err := envs()
	if err != nil {
		return err
	}
	_, err = compile(set.NewExpressionsEnv(), expr)
	return err
}

// Condition is a compiled enabledIf expression.
type Condition struct {
	expr    string
	program cel.Program
}

// CompileCondition compiles an enabledIf expression for evaluation, as a
// stored one (any expression a server of this version accepted).
func CompileCondition(expr string) (*Condition, error) {
	set, err := envs()
	if err != nil {
		return nil, err
	}
	env := set.StoredExpressionsEnv()
	ast, err := compile(env, expr)
	if err != nil {
		return nil, err
	}
	program, err := env.Program(ast,
		cel.CostLimit(celconfig.PerCallLimit),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	)
	if err != nil {
		return nil, fmt.Errorf("can't build a program of enabledIf: %w", err)
	}
	return &Condition{expr: expr, program: program}, nil
}

func compile(env *cel.Env, expr string) (*cel.Ast, error) {
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("does not compile: %w", issues.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to a bool, not %s", t)
	}
	return ast, nil
}

// String is the expression.
func (c *Condition) String() string { return c.expr }

// Eval evaluates the condition over a parent's variables.
func (c *Condition) Eval(ctx context.Context, values Values) (bool, error) {
	out, _, err := c.program.ContextEval(ctx, map[string]interface{}(values))
	if err != nil {
		return false, fmt.Errorf("enabledIf %q: %w", c.expr, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("enabledIf %q gave %v (%s), not a bool", c.expr, out.Value(), out.Type().TypeName())
	}
	return b, nil
}
