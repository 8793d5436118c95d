// Package apply executes a sync plan against the target cluster:
// server-side apply of children under one field manager per controller,
// deletes with UID preconditions, and the parent's status.
package apply

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// FieldManager is the server-side apply manager of one CompositeController.
func FieldManager(controller string) string { return syncengine.FieldManager(controller) }

// Child server-side-applies one desired child. With dryRun the target
// cluster runs admission and defaulting and answers with what it would
// store, and stores nothing.
func Child(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, child *unstructured.Unstructured, controller string, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager(controller), Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	applied, err := resource(client, gvr, child.GetNamespace()).Apply(ctx, child.GetName(), child, opts)
	if err != nil {
		return nil, fmt.Errorf("can't apply %s %s: %w", child.GetKind(), objectName(child), err)
	}
	return applied, nil
}

func objectName(obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
