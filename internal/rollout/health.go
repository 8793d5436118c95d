package rollout

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// parentVar is the variable a health condition reads the parent as.
const parentVar = "parent"

// envs are the CEL environments of a rollout's health condition:
// Kubernetes' base environment with the parent declared, dynamic (its
// shape is the parent resource's).
var envs = sync.OnceValues(func() (*environment.EnvSet, error) {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(parentVar, cel.DynType)},
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
	ast, err := compile(env, expr)
	if err != nil {
		return nil, err
	}
	program, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, err
	}
	return &Health{expr: expr, program: program}, nil
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

// HealthCost is the estimated cost of one evaluation of a health
// condition: Max in the worst case the schema allows, Typical with every
// list and map the schema does not bound sized at typicalElements; Dynamic
// says Max sized a part of the parent its schema leaves open, and bounds
// nothing.
type HealthCost struct {
	Max, Typical uint64
	Dynamic      bool
}

// EstimateHealth compiles expr as a new health condition with the parent
// typed by schema, the parent resource's OpenAPI schema (its references
// resolved), and estimates the worst-case cost of one evaluation, as
// Kubernetes estimates a CRD validation rule's: every list, map and string
// as long as its maxItems, maxProperties or maxLength, or as many as a
// request of the largest size could hold. The runtime limit
// (celconfig.PerCallLimit, which CompileHealth sets) then fails a
// condition whose estimate exceeds it on the parents that come near the
// worst case, every time they are evaluated: better refused when written.
//
// The condition runs over the parent as stored, undecoded: parts of the
// schema it leaves open (x-kubernetes-preserve-unknown-fields,
// int-or-string) are typed dynamic, and a date-time, duration or byte
// string is a string. dynamic tells whether the estimate had to size such
// a part, which the schema does not bound: cost is then no bound, and only
// the runtime limit is.
func EstimateHealth(expr string, schema *spec.Schema) (HealthCost, error) {
	parent := common.SchemaDeclType(undecoded(&openapi.Schema{Schema: schema}), true)
	if parent == nil {
		return HealthCost{}, fmt.Errorf("can't type the parent: its schema has no type")
	}
	// A name that is no qualified name the condition could mean: named
	// "parent", parent.spec would be the name of spec's type.
	parent = parent.MaybeAssignTypeName("composite.Parent")
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(parentVar, parent.CelType())},
		DeclTypes:         []*apiservercel.DeclType{parent},
	})
	if err != nil {
		return HealthCost{}, fmt.Errorf("can't declare the parent's type: %w", err)
	}
	env := set.NewExpressionsEnv()
	ast, err := compile(env, expr)
	if err != nil {
		return HealthCost{}, err
	}
	var cost HealthCost
	for _, sizes := range []*parentSizes{{root: parent}, {root: parent, most: typicalElements}} {
		estimate, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: sizes})
		if err != nil {
			return HealthCost{}, fmt.Errorf("can't estimate the cost: %w", err)
		}
		if sizes.most == 0 {
			cost.Max, cost.Dynamic = estimate.Max, sizes.dynamic
		} else {
			cost.Typical = estimate.Max
		}
	}
	return cost, nil
}

// typicalElements is how many elements a list or map whose schema sets no
// bound holds on a parent as the typical estimate sizes it. The worst
// case sizes it to fill a request (about a million small items), which
// every loop over such a list exceeds, a Deployment's conditions among
// them; a parent with more than a thousand of anything is rare, and the
// condition's evaluation stops at the per-call limit on it.
const typicalElements = 1000

// parentSizes sizes the parts of a parent for the cost estimator from the
// parent's type, as apiextensions' estimator of CRD rules sizes self, and
// notes when it was asked for a part whose type is dynamic.
type parentSizes struct {
	root *apiservercel.DeclType
	// most, when not 0, sizes a part at most this large.
	most    uint64
	dynamic bool
}

func (p *parentSizes) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 || path[0] != parentVar {
		return nil
	}
	node := p.root
	for _, name := range path[1:] {
		if p.open(node) {
			return nil
		}
		switch name {
		case "@items", "@values":
			node = node.ElemType
		case "@keys":
			node = node.KeyType
		default:
			f, ok := node.Fields[name]
			if !ok {
				return nil
			}
			node = f.Type
		}
		if node == nil {
			return nil
		}
	}
	if p.open(node) {
		return nil
	}
	size := uint64(node.MaxElements)
	if p.most != 0 {
		size = min(size, p.most)
	}
	return &checker.SizeEstimate{Min: 0, Max: size}
}

// open tells whether node is a part the schema leaves open, and notes it.
func (p *parentSizes) open(node *apiservercel.DeclType) bool {
	if node.CelType().IsExactType(cel.DynType) {
		p.dynamic = true
		return true
	}
	return false
}

func (p *parentSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// undecoded is a schema as a health condition sees the parent it
// describes: undecoded JSON. A part that preserves unknown fields is
// dynamic (typed as common.SchemaDeclType types an int-or-string, the one
// dynamic type it makes), not an object of only its declared fields; a
// string of any format is a string.
func undecoded(s common.Schema) common.Schema {
	if s == nil {
		return nil
	}
	return undecodedSchema{s}
}

type undecodedSchema struct{ common.Schema }

func (s undecodedSchema) Format() string { return "" }

func (s undecodedSchema) IsXIntOrString() bool {
	return s.Schema.IsXIntOrString() || s.Schema.IsXPreserveUnknownFields()
}

func (s undecodedSchema) Items() common.Schema { return undecoded(s.Schema.Items()) }

func (s undecodedSchema) Properties() map[string]common.Schema {
	props := s.Schema.Properties()
	if props == nil {
		return nil
	}
	out := make(map[string]common.Schema, len(props))
	for name, p := range props {
		out[name] = undecoded(p)
	}
	return out
}

func (s undecodedSchema) AdditionalProperties() common.SchemaOrBool {
	if a := s.Schema.AdditionalProperties(); a != nil {
		return undecodedSchemaOrBool{a}
	}
	return nil
}

func (s undecodedSchema) WithTypeAndObjectMeta() common.Schema {
	return undecoded(s.Schema.WithTypeAndObjectMeta())
}

type undecodedSchemaOrBool struct{ common.SchemaOrBool }

func (s undecodedSchemaOrBool) Schema() common.Schema { return undecoded(s.SchemaOrBool.Schema()) }

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
