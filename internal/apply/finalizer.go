package apply

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// SetFinalizer adds (add) or removes finalizer on parent and returns the
// parent as stored, or nil when it is gone. The patch carries the
// resourceVersion, so it never overwrites a change it did not see; a
// conflict is returned and the next sync tries again.
func SetFinalizer(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, parent *unstructured.Unstructured, finalizer string, add bool) (*unstructured.Unstructured, error) {
	finalizers := []string{}
	for _, f := range parent.GetFinalizers() {
		if f != finalizer {
			finalizers = append(finalizers, f)
		}
	}
	if add {
		finalizers = append(finalizers, finalizer)
	}
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"finalizers": finalizers, "resourceVersion": parent.GetResourceVersion()},
	})
	if err != nil {
		return nil, err
	}
	updated, err := resource(client, gvr, parent.GetNamespace()).Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		verb := "remove"
		if add {
			verb = "add"
		}
		return nil, fmt.Errorf("can't %s finalizer %s of %s %s: %w", verb, finalizer, parent.GetKind(), objectName(parent), err)
	}
	return updated, nil
}
