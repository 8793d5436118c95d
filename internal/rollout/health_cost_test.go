package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// parentSchema is a parent resource's schema as /openapi/v3 serves a
// CRD's: a bounded and an unbounded list, a date-time, and a part that
// preserves unknown fields.
const parentSchema = `{"type": "object", "properties": {
  "spec": {"type": "object", "properties": {
    "replicas": {"type": "integer"},
    "names": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 63}},
    "items": {"type": "array", "items": {"type": "string"}},
    "created": {"type": "string", "format": "date-time"},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
  }},
  "status": {"type": "object", "properties": {"readyReplicas": {"type": "integer"}}}
}}`

// helloSchema is the e2e tests' hellos: spec and status hold anything.
const helloSchema = `{"type": "object", "properties": {
  "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}}`

func schemaOf(t *testing.T, text string) *spec.Schema {
	t.Helper()
	s := &spec.Schema{}
	if err := json.Unmarshal([]byte(text), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// numbers is a list literal of n integers.
func numbers(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, i)
	}
	b.WriteString("]")
	return b.String()
}

// TestHealthCostIsEstimatedOverTheParentsSchema: with the parent typed by
// its schema, a condition is estimated as Kubernetes estimates a CRD
// rule; what would exceed the per-call limit on some parent (two nested
// all() over 1,000-element lists, or over a list the schema does not
// bound) is over it, a condition over bounded parts is not, and a part
// that preserves unknown fields cannot be bounded (dynamic). The typed
// compile refuses what no parent of the schema could run, and types the
// parent as the condition reads it, undecoded.
func TestHealthCostIsEstimatedOverTheParentsSchema(t *testing.T) {
	cases := []struct {
		name, schema, expr string
		// over: the estimate exceeds the per-call limit; dynamic: for
		// want of a bound on a dynamic part.
		over, dynamic bool
		// err is part of the typed compile's error; "" for none.
		err string
	}{
		{name: "a comparison of two fields is cheap", schema: parentSchema, expr: `parent.status.readyReplicas == parent.spec.replicas`},
		{name: "all() over a list of at most 10 names is cheap", schema: parentSchema, expr: `parent.spec.names.all(n, parent.spec.names.all(m, n == m || n != m))`},
		{name: "nested all() over two 1,000-element list literals is over the limit", schema: parentSchema,
			expr: fmt.Sprintf(`%s.all(x, %s.all(y, x != y || parent.spec.replicas > 0))`, numbers(1000), numbers(1000)), over: true},
		{name: "nested all() over a list the schema does not bound is over the limit", schema: parentSchema,
			expr: `parent.spec.items.all(x, parent.spec.items.all(y, x == y))`, over: true},
		{name: "a part that preserves unknown fields is dynamic, and unbounded", schema: parentSchema,
			expr: `parent.spec.free.items.all(x, parent.spec.free.items.all(y, x == y))`, over: true, dynamic: true},
		{name: "a field of a part that preserves unknown fields compiles", schema: parentSchema, expr: `parent.spec.free.anything == 1`},
		{name: "a date-time is the string the parent holds", schema: parentSchema, expr: `parent.spec.created.startsWith("2026-")`},
		{name: "the e2e tests' condition over hellos compiles, cheap", schema: helloSchema, expr: `has(parent.status.count) && parent.status.count == 3`},
		{name: "a field the schema does not have is a type error", schema: parentSchema, expr: `parent.spec.replica == 3`, err: "undefined field 'replica'"},
		{name: "a comparison of an integer with a string is a type error", schema: parentSchema, expr: `parent.spec.replicas == "3"`, err: "no matching overload"},
		{name: "a condition that is no bool is refused", schema: parentSchema, expr: `parent.spec.replicas`, err: "must evaluate to a bool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hc, err := EstimateHealth(c.expr, schemaOf(t, c.schema))
			cost, dynamic := hc.Max, hc.Dynamic
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if over := cost > celconfig.PerCallLimit; over != c.over || (over && dynamic != c.dynamic) {
				t.Errorf("estimated %d (over the limit %d: %v), dynamic %v; want over %v, dynamic %v", cost, uint64(celconfig.PerCallLimit), over, dynamic, c.over, c.dynamic)
			}
		})
	}
}
