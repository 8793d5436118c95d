package patches

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// inline is the generator of inline patches (spec.hooks.patches[].
// definitions), as a ClusterClass's inline JSON patches: for every child a
// definition's selector matches, its jsonPatches, with values from the
// variables, make one RFC 6902 patch.
type inline struct {
	definitions []definition
}

type definition struct {
	apiVersion, kind, name string
	ops                    []operation
}

type operation struct {
	op, path string
	pointer  pointer
	// One of the three for add and replace; none for remove.
	value    interface{}
	hasValue bool
	variable string
	template *variables.Template
}

var _ hookapi.Generator = &inline{}

// NewInline returns the generator of inline patches. It parses the paths,
// values and templates once; validation has checked the rest when the
// controller was written.
//
// The pipeline applies inline patches in the process, without the JSON
// round trip of Generate; Generate is what they answer as a Generator, e.g.
// to a caller of their own.
func NewInline(defs []v1alpha1.PatchDefinition) (hookapi.Generator, error) {
	g := &inline{}
	for i, d := range defs {
		def := definition{apiVersion: d.Selector.APIVersion, kind: d.Selector.Kind, name: d.Selector.Name}
		for j, p := range d.JSONPatches {
			op := operation{op: string(p.Op), path: p.Path}
			ptr, err := parsePointer(p.Path)
			if err != nil {
				return nil, fmt.Errorf("definitions[%d].jsonPatches[%d]: %w", i, j, err)
			}
			op.pointer = ptr
			switch p.Op {
			case v1alpha1.JSONPatchOpAdd, v1alpha1.JSONPatchOpReplace, v1alpha1.JSONPatchOpRemove:
			default:
				return nil, fmt.Errorf("definitions[%d].jsonPatches[%d]: op %q is not supported: must be add, replace or remove", i, j, p.Op)
			}
			switch {
			case p.Op == v1alpha1.JSONPatchOpRemove:
			case p.Value != nil:
				if err := utiljson.Unmarshal(p.Value.Raw, &op.value); err != nil {
					return nil, fmt.Errorf("definitions[%d].jsonPatches[%d].value is not JSON: %w", i, j, err)
				}
				op.hasValue = true
			case p.ValueFrom != nil && p.ValueFrom.Variable != nil:
				op.variable = *p.ValueFrom.Variable
			case p.ValueFrom != nil && p.ValueFrom.Template != nil:
				tmpl, err := variables.ParseTemplate(*p.ValueFrom.Template)
				if err != nil {
					return nil, fmt.Errorf("definitions[%d].jsonPatches[%d].valueFrom.template %w", i, j, err)
				}
				op.template = tmpl
			default:
				return nil, fmt.Errorf("definitions[%d].jsonPatches[%d]: %s needs a value or valueFrom", i, j, p.Op)
			}
			def.ops = append(def.ops, op)
		}
		g.definitions = append(g.definitions, def)
	}
	return g, nil
}

func (d *definition) matches(ref hookapi.ObjectRef) bool {
	return ref.APIVersion == d.apiVersion && ref.Kind == d.kind && (d.name == "" || ref.Name == d.name)
}

// Generate answers one JSONPatch per child that a definition selects.
func (g *inline) Generate(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
	parentValues := variables.ToValues(req.Variables)
	resp := &hookapi.GenerateResponse{}
	for _, item := range req.Items {
		var (
			ops    []map[string]interface{}
			values variables.Values
		)
		for i := range g.definitions {
			def := &g.definitions[i]
			if !def.matches(item.Ref) {
				continue
			}
			if values == nil {
				values = variables.Merge(parentValues, variables.ToValues(item.Variables))
			}
			for j, op := range def.ops {
				out := map[string]interface{}{"op": op.op, "path": op.path}
				if op.op != string(v1alpha1.JSONPatchOpRemove) {
					v, err := op.compute(values)
					if err != nil {
						return nil, fmt.Errorf("child %s: definitions[%d].jsonPatches[%d] (%s %s): %w", describeRef(item.Ref), i, j, op.op, op.path, err)
					}
					out["value"] = v
				}
				ops = append(ops, out)
			}
		}
		if len(ops) == 0 {
			continue
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return nil, fmt.Errorf("child %s: can't encode the patch: %w", describeRef(item.Ref), err)
		}
		resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONPatch, Patch: patch})
	}
	return resp, nil
}

// compute is the operation's value for a child: a copy, so that no two
// children share a value that a later patch could change in one of them.
// patch applies the definitions to the children it selects, in the
// process, with the semantics Generate's JSON patch has when applied (RFC
// 6902), but without encoding the child, the patch and the result. A
// patched child is a new object sharing what the patch left alone with the
// child it was made from; neither is ever modified in place. Children no
// definition selects are returned as they are.
func (g *inline) patch(parent variables.Values, children []*unstructured.Unstructured, refs []hookapi.ObjectRef) ([]*unstructured.Unstructured, []Change, error) {
	out := append([]*unstructured.Unstructured(nil), children...)
	var changes []Change
	for idx, child := range children {
		ref := refs[idx]
		var (
			obj    map[string]interface{}
			values = &variables.Child{Parent: parent, Ref: ref}
			// roots are the containers the operations changed: nothing
			// else of the child can differ.
			roots []pointer
		)
		for i := range g.definitions {
			def := &g.definitions[i]
			if !def.matches(ref) {
				continue
			}
			if obj == nil {
				// Operations copy what they change: the child itself
				// is never modified.
				obj = child.Object
			}
			for j := range def.ops {
				op := &def.ops[j]
				var value interface{}
				if op.op != string(v1alpha1.JSONPatchOpRemove) {
					v, err := op.compute(values)
					if err != nil {
						return nil, nil, fmt.Errorf("child %s: definitions[%d].jsonPatches[%d] (%s %s): %w", describeRef(ref), i, j, op.op, op.path, err)
					}
					value = v
				}
				next, err := applyOperation(obj, op.op, op.pointer, value)
				if err != nil {
					return nil, nil, fmt.Errorf("child %s: definitions[%d].jsonPatches[%d] (%s %s) does not apply: %w", describeRef(ref), i, j, op.op, op.path, err)
				}
				obj = next
				roots = append(roots, op.pointer[:len(op.pointer)-1])
			}
		}
		if obj == nil {
			continue
		}
		patched := &unstructured.Unstructured{Object: obj}
		for _, p := range identityChanges(ref, patched) {
			return nil, nil, fmt.Errorf("child %s: %s", describeRef(ref), p)
		}
		// A patch that changes nothing leaves the child as it was.
		if d := DiffWithin(child.Object, obj, roots); len(d) > 0 {
			out[idx] = patched
			changes = append(changes, Change{Ref: ref, Diff: d})
		}
	}
	return out, changes, nil
}

func (op *operation) compute(values variables.Source) (interface{}, error) {
	switch {
	case op.hasValue:
		return copyValue(op.value), nil
	case op.template != nil:
		v, err := op.template.Execute(values)
		if err != nil {
			return nil, fmt.Errorf("valueFrom.template: %w", err)
		}
		return v, nil
	default:
		v, ok := variables.Lookup(values, op.variable)
		if !ok {
			return nil, fmt.Errorf("valueFrom.variable %s is not set", op.variable)
		}
		return copyValue(v), nil
	}
}
