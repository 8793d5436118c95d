// Package apply executes a sync plan against the target cluster:
// server-side apply of children under one field manager per controller,
// deletes with UID preconditions, and the parent's status.
package apply

import (
	"context"
	"fmt"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/unstructuredjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// Child server-side-applies one desired child. With dryRun the target
// cluster runs admission and defaulting and answers with what it would
// store, and stores nothing.
func Child(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, child *unstructured.Unstructured, controller string, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: definition.FieldManager(controller), Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	applied, err := resource(client, gvr, child.GetNamespace()).Apply(ctx, child.GetName(), child, opts)
	if err != nil {
		return nil, fmt.Errorf("can't apply %s %s: %w", child.GetKind(), objectName(child), err)
	}
	return applied, nil
}

// DryRunner is the engine's dry run of an apply (engine.DryRunner): Child
// with dryRun, through client, under the controller's field manager, as
// Execute applies it.
type DryRunner struct {
	Client     dynamic.Interface
	Controller string
}

// DryRunApply answers what applying child would store.
func (r DryRunner) DryRunApply(ctx context.Context, gvr schema.GroupVersionResource, child *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return Child(ctx, r.Client, gvr, child, r.Controller, true)
}

// Stored is what the loop keeps of a child it applied: the request's body
// and the identity and version the API server stored it at, with which
// the next sync knows the child unchanged without merging it again.
type Stored struct {
	Body            []byte
	UID             types.UID
	ResourceVersion string
	// Unchanged: the API server stored nothing new (the resourceVersion is
	// the one observed), so no watch event will echo the write.
	Unchanged bool
}

// ChildMetadata server-side-applies one desired child and reads back only
// the stored object's metadata, in protobuf where the server speaks it
// (kube-apiserver does for every resource, CRDs included, when asked for
// PartialObjectMetadata): the loop needs nothing else of the answer, and
// the whole object in JSON costs the API server its encoding and this
// server its decoding, once per child written.
func ChildMetadata(ctx context.Context, client metadata.Interface, gvr schema.GroupVersionResource, child *unstructured.Unstructured, controller string) (Stored, error) {
	body, err := unstructuredjson.Marshal(child.Object)
	if err != nil {
		return Stored{}, fmt.Errorf("can't apply %s %s: %w", child.GetKind(), objectName(child), err)
	}
	force := true
	opts := metav1.PatchOptions{
		FieldManager: definition.FieldManager(controller),
		Force:        &force,
		// For an apply, kube-apiserver's default (Warn) parses the body a
		// second time, as YAML, only to find duplicate keys, which a body
		// marshalled from a map cannot have: a tenth of what an apply costs
		// it. Unknown fields are still refused by a built-in kind's schema;
		// a CRD prunes them either way, Ignore only drops the warning that
		// would have reached this server's log.
		FieldValidation: metav1.FieldValidationIgnore,
	}
	stored, err := client.Resource(gvr).Namespace(child.GetNamespace()).Patch(ctx, child.GetName(), types.ApplyPatchType, body, opts)
	if err != nil {
		return Stored{}, fmt.Errorf("can't apply %s %s: %w", child.GetKind(), objectName(child), err)
	}
	return Stored{Body: body, UID: stored.UID, ResourceVersion: stored.ResourceVersion}, nil
}

func objectName(obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
