// Package variables defines the builtin variables of spec.hooks.patches, as
// Cluster API's ClusterClass patches have them: their shape, their values for
// one parent and one child, lookups by dotted path (valueFrom.variable), Go
// templates over them (valueFrom.template) and CEL expressions over them
// (enabledIf). Validation and the patch engine share it, so that what is
// accepted when a CompositeController is written is what runs.
//
// The variables, as a patch request carries them:
//
//	builtin:
//	  controller: {name, generation}
//	  parent:     {apiVersion, kind, metadata: {name, namespace, labels, annotations}, spec}
//	  child:      {apiVersion, kind, namespace, name}   # per child only
package variables

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// Builtin is the name of the one top-level variable.
const Builtin = "builtin"

// ForParent returns the variables of a parent of a controller, shared by all
// its children. The spec is a copy: the parent may come from an informer's
// cache, and a generator may modify what it is given.
func ForParent(controller string, generation int64, parent *unstructured.Unstructured) hookapi.Variables {
	spec, _ := parent.Object["spec"].(map[string]interface{})
	if spec == nil {
		spec = map[string]interface{}{}
	} else {
		spec = runtime.DeepCopyJSON(spec)
	}
	labels, annotations := parent.GetLabels(), parent.GetAnnotations()
	// Always maps, never null, so that `"k" in builtin.parent.metadata.labels`
	// is false rather than an error for a parent without labels.
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	return hookapi.Variables{Builtin: hookapi.BuiltinVariables{
		Controller: &hookapi.ControllerVariables{Name: controller, Generation: generation},
		Parent: &hookapi.ParentVariables{
			APIVersion: parent.GetAPIVersion(),
			Kind:       parent.GetKind(),
			Metadata: hookapi.ParentMetadata{
				Name:        parent.GetName(),
				Namespace:   parent.GetNamespace(),
				Labels:      labels,
				Annotations: annotations,
			},
			Spec: spec,
		},
	}}
}

// ForChild returns the variables of one child: builtin.child only, as a
// patch request's item carries them.
func ForChild(ref hookapi.ObjectRef) hookapi.Variables {
	return hookapi.Variables{Builtin: hookapi.BuiltinVariables{Child: &ref}}
}

// Values are variables as CEL, templates and lookups read them: nested maps
// of JSON values.
type Values map[string]interface{}

// ToValues converts variables to Values. The maps of vars (labels,
// annotations, spec) are shared, not copied.
func ToValues(vars hookapi.Variables) Values {
	builtin := map[string]interface{}{}
	b := vars.Builtin
	if c := b.Controller; c != nil {
		builtin["controller"] = map[string]interface{}{"name": c.Name, "generation": c.Generation}
	}
	if p := b.Parent; p != nil {
		spec := p.Spec
		if spec == nil {
			spec = map[string]interface{}{}
		}
		builtin["parent"] = map[string]interface{}{
			"apiVersion": p.APIVersion,
			"kind":       p.Kind,
			"metadata": map[string]interface{}{
				"name":        p.Metadata.Name,
				"namespace":   p.Metadata.Namespace,
				"labels":      stringMap(p.Metadata.Labels),
				"annotations": stringMap(p.Metadata.Annotations),
			},
			"spec": spec,
		}
	}
	if c := b.Child; c != nil {
		builtin["child"] = map[string]interface{}{
			"apiVersion": c.APIVersion, "kind": c.Kind, "namespace": c.Namespace, "name": c.Name,
		}
	}
	return Values{Builtin: builtin}
}

// Merge returns the variables of a child: the parent's with the child's
// added (builtin.child). Neither is modified.
func Merge(parent, child Values) Values {
	out := Values{}
	pb, _ := parent[Builtin].(map[string]interface{})
	cb, _ := child[Builtin].(map[string]interface{})
	builtin := make(map[string]interface{}, len(pb)+len(cb))
	for k, v := range pb {
		builtin[k] = v
	}
	for k, v := range cb {
		builtin[k] = v
	}
	out[Builtin] = builtin
	return out
}

// WithChild returns the variables of one child: the parent's with
// builtin.child, the child's ref. Only the builtin map is new; the parent's
// values are shared.
func WithChild(parent Values, ref hookapi.ObjectRef) Values {
	pb, _ := parent[Builtin].(map[string]interface{})
	builtin := make(map[string]interface{}, len(pb)+1)
	for k, v := range pb {
		builtin[k] = v
	}
	builtin["child"] = map[string]interface{}{
		"apiVersion": ref.APIVersion, "kind": ref.Kind, "namespace": ref.Namespace, "name": ref.Name,
	}
	return Values{Builtin: builtin}
}

func stringMap(m map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Scope says which variables exist where: enabledIf is evaluated once per
// parent, before any child is looked at, so it has no builtin.child.
type Scope int

const (
	// ParentScope: builtin.controller and builtin.parent (enabledIf).
	ParentScope Scope = iota
	// ChildScope: builtin.child too (valueFrom of an inline patch).
	ChildScope
)

// leaves name the fields of the fixed part of the variables: a field maps
// to its own fields, nil for a leaf.
type leaves map[string]leaves

var (
	refFields        = leaves{"apiVersion": nil, "kind": nil, "namespace": nil, "name": nil}
	controllerFields = leaves{"name": nil, "generation": nil}
	parentFields     = leaves{
		"apiVersion": nil,
		"kind":       nil,
		"metadata":   leaves{"name": nil, "namespace": nil, "labels": nil, "annotations": nil},
		"spec":       nil,
	}
)

// openEnded are the fields below which any path is valid: what a parent's
// spec holds is the parent resource's business, and labels and annotations
// have any keys.
var openEnded = map[string]bool{
	"builtin.parent.spec":                 true,
	"builtin.parent.metadata.labels":      true,
	"builtin.parent.metadata.annotations": true,
}

// keyed are the open-ended fields whose rest is a single key, dots
// included: label and annotation keys are often dotted
// ("app.kubernetes.io/name").
var keyed = map[string]bool{
	"builtin.parent.metadata.labels":      true,
	"builtin.parent.metadata.annotations": true,
}

// CheckPath checks that path, a dotted path such as
// "builtin.parent.spec.replicas", names a variable that exists in scope. It
// says nothing about whether a given parent sets it: a spec field may be
// absent.
func CheckPath(path string, scope Scope) error {
	segments := strings.Split(path, ".")
	for _, s := range segments {
		if s == "" {
			return fmt.Errorf("%q has an empty segment", path)
		}
	}
	if segments[0] != Builtin {
		return fmt.Errorf("%q is not a variable: variables start with %q (builtin.parent, builtin.controller, builtin.child)", path, Builtin)
	}
	if len(segments) == 1 {
		return nil
	}
	top := leaves{"controller": controllerFields, "parent": parentFields}
	if scope == ChildScope {
		top["child"] = refFields
	}
	fields := top
	for i := 1; i < len(segments); i++ {
		prefix := strings.Join(segments[:i], ".")
		if openEnded[prefix] {
			return nil
		}
		if fields == nil {
			return fmt.Errorf("%q: %s has no fields", path, prefix)
		}
		next, ok := fields[segments[i]]
		if !ok {
			return fmt.Errorf("%q: %s has no field %q (it has %s)", path, prefix, segments[i], fieldNames(fields))
		}
		fields = next
	}
	return nil
}

func fieldNames(fields leaves) string {
	names := make([]string, 0, len(fields))
	for _, n := range []string{"controller", "parent", "child", "apiVersion", "kind", "metadata", "spec", "namespace", "name", "generation", "labels", "annotations"} {
		if _, ok := fields[n]; ok {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// Source holds variables for lookups and templates.
type Source interface {
	// Get returns the value at a path, given as its segments, and whether
	// it is set. A numeric segment indexes a list.
	Get(segments []string) (interface{}, bool)
	// All returns all the variables, as text/template reads them.
	All() Values
}

// Get walks values along segments.
func (v Values) Get(segments []string) (interface{}, bool) {
	return get(map[string]interface{}(v), segments)
}

// All returns v.
func (v Values) All() Values { return v }

func get(cur interface{}, segments []string) (interface{}, bool) {
	for _, seg := range segments {
		switch v := cur.(type) {
		case map[string]interface{}:
			next, ok := v[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case []interface{}:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(v) {
				return nil, false
			}
			cur = v[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Child is the variables of one child: its parent's, and builtin.child.
// Reading builtin.child or the parent's variables costs no map; only
// All builds one, for text/template.
type Child struct {
	Parent Values
	Ref    hookapi.ObjectRef
	all    Values
}

// Get reads builtin.child from the ref, anything else from the parent.
func (c *Child) Get(segments []string) (interface{}, bool) {
	if len(segments) >= 2 && segments[0] == Builtin && segments[1] == "child" {
		if len(segments) == 2 {
			return c.ref(), true
		}
		if len(segments) > 3 {
			return nil, false
		}
		v, ok := c.ref()[segments[2]]
		return v, ok
	}
	if len(segments) == 1 && segments[0] == Builtin {
		return c.All()[Builtin], true
	}
	return c.Parent.Get(segments)
}

func (c *Child) ref() map[string]interface{} {
	return map[string]interface{}{"apiVersion": c.Ref.APIVersion, "kind": c.Ref.Kind, "namespace": c.Ref.Namespace, "name": c.Ref.Name}
}

// All returns the parent's variables with builtin.child.
func (c *Child) All() Values {
	if c.all == nil {
		c.all = WithChild(c.Parent, c.Ref)
	}
	return c.all
}

// Lookup returns the value at a dotted path, which CheckPath accepts, and
// whether it is set. A numeric segment below builtin.parent.spec indexes a
// list; below labels and annotations, the rest of the path is one key.
func Lookup(src Source, path string) (interface{}, bool) {
	segments := strings.Split(path, ".")
	for i := range segments {
		if keyed[strings.Join(segments[:i], ".")] {
			segments = append(segments[:i], strings.Join(segments[i:], "."))
			break
		}
	}
	return src.Get(segments)
}
