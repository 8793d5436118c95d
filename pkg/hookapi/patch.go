package hookapi

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// GenerateRequest is what a patch hook (spec.hooks.patches[].webhook)
// receives, the request of Cluster API's GeneratePatches: the variables of the
// parent and every desired child, as the sync hook and the patches before
// this one left it.
type GenerateRequest struct {
	// Variables are the variables every item shares: builtin.controller
	// and builtin.parent.
	Variables Variables `json:"variables"`
	// Items are the desired children, one each.
	Items []*GenerateRequestItem `json:"items"`
}

// GenerateRequestItem is one desired child.
type GenerateRequestItem struct {
	// UID names the item in the answer. It is opaque: stable for a child
	// (its apiVersion, kind, namespace and name) and unique in a request.
	UID string `json:"uid"`
	// Ref says which child this is.
	Ref ObjectRef `json:"ref"`
	// Variables are the child's own variables: builtin.child.
	Variables Variables `json:"variables"`
	// Object is the desired child.
	Object *unstructured.Unstructured `json:"object"`
}

// GenerateResponse is what a patch hook answers: a patch for each child it
// changes. A child it leaves alone has no item.
type GenerateResponse struct {
	Items []GenerateResponseItem `json:"items"`
}

// GenerateResponseItem is the patch of one child.
type GenerateResponseItem struct {
	// UID is the uid of the request's item the patch is for.
	UID string `json:"uid"`
	// PatchType is JSONPatch (RFC 6902) or JSONMergePatch (RFC 7386).
	PatchType PatchType `json:"patchType"`
	// Patch is the patch, as JSON.
	Patch json.RawMessage `json:"patch"`
}

// PatchType says how a GenerateResponseItem's patch is applied.
type PatchType string

const (
	// PatchTypeJSONPatch is an RFC 6902 JSON patch: a list of operations.
	PatchTypeJSONPatch PatchType = "JSONPatch"
	// PatchTypeJSONMergePatch is an RFC 7386 JSON merge patch: an object
	// merged into the child, null removing a field.
	PatchTypeJSONMergePatch PatchType = "JSONMergePatch"
)

// ObjectRef names a child.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is empty for a cluster-scoped child.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Variables are the variables of a patch: everything is under builtin, as
// in Cluster API.
type Variables struct {
	Builtin BuiltinVariables `json:"builtin"`
}

// BuiltinVariables are the variables the server provides. A request's
// Variables have Controller and Parent, an item's only Child.
type BuiltinVariables struct {
	Controller *ControllerVariables `json:"controller,omitempty"`
	Parent     *ParentVariables     `json:"parent,omitempty"`
	Child      *ObjectRef           `json:"child,omitempty"`
}

// ControllerVariables are builtin.controller: the CompositeController.
type ControllerVariables struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// ParentVariables are builtin.parent: the parent's identity, labels,
// annotations and spec.
type ParentVariables struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Metadata   ParentMetadata         `json:"metadata"`
	Spec       map[string]interface{} `json:"spec"`
}

// ParentMetadata is builtin.parent.metadata. Labels and Annotations are
// never null.
type ParentMetadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Generator computes patches of desired children: a patch hook over HTTP
// (internal/hooks implements it), inline JSON patches (internal/patches), or Go code
// in the same process through GeneratorFunc.
type Generator interface {
	Generate(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error)
}

// GeneratorFunc is an in-process Generator.
type GeneratorFunc func(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error)

// Generate calls f.
func (f GeneratorFunc) Generate(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error) {
	return f(ctx, req)
}

var _ Generator = GeneratorFunc(nil)
