package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Decoration is what a DecoratorController writes to an object it
// decorates: labels and annotations (a nil value removes one), and a status
// (nil leaves it as it is).
type Decoration struct {
	Labels, Annotations map[string]*string
	Status              map[string]interface{}
	// StatusSubresource says whether the object's resource has a status
	// subresource: without one, the status is part of the object, written
	// with the labels, as Metacontroller's update of the whole object does.
	StatusSubresource bool
}

// Decorate writes d to obj, only what changes anything: labels and
// annotations with one merge patch carrying obj's resourceVersion (a
// change it did not see is a conflict, and the object's own event syncs it
// again), then the status. It returns the object as each write stored it,
// in order: none when it wrote nothing or the API server stored nothing of
// it (storedNothing).
func Decorate(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, d Decoration) ([]*unstructured.Unstructured, error) {
	meta := map[string]interface{}{}
	if m := changes(obj.GetLabels(), d.Labels); m != nil {
		meta["labels"] = m
	}
	if m := changes(obj.GetAnnotations(), d.Annotations); m != nil {
		meta["annotations"] = m
	}
	patch := map[string]interface{}{}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	if d.Status != nil && !d.StatusSubresource {
		old, _, _ := unstructured.NestedMap(obj.Object, "status")
		if !equality.Semantic.DeepEqual(normalize(old), normalize(d.Status)) {
			// A merge patch merges maps: null out what the hook dropped.
			status := map[string]interface{}{}
			for k := range old {
				status[k] = nil
			}
			for k, v := range d.Status {
				status[k] = v
			}
			patch["status"] = status
		}
	}
	var written []*unstructured.Unstructured
	if len(patch) > 0 {
		patch["metadata"] = withVersion(meta, obj.GetResourceVersion())
		data, err := json.Marshal(patch)
		if err != nil {
			return nil, err
		}
		stored, err := resource(client, gvr, obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
		if err != nil {
			return nil, fmt.Errorf("can't decorate %s %s: %w", obj.GetKind(), objectName(obj), err)
		}
		if !storedNothing(obj, stored) {
			written = append(written, stored)
		}
		obj = stored
	}
	if d.Status == nil || !d.StatusSubresource {
		return written, nil
	}
	stored, err := writeStatus(ctx, client, gvr, obj, d.Status)
	if stored != nil {
		written = append(written, stored)
	}
	return written, err
}

// changes is the merge patch that makes current hold what want says: nil
// when nothing changes.
func changes(current map[string]string, want map[string]*string) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range want {
		old, has := current[k]
		switch {
		case v == nil && has:
			out[k] = nil
		case v != nil && (!has || old != *v):
			out[k] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func withVersion(meta map[string]interface{}, resourceVersion string) map[string]interface{} {
	out := map[string]interface{}{"resourceVersion": resourceVersion}
	for k, v := range meta {
		out[k] = v
	}
	return out
}
