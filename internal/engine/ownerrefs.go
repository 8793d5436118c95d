package engine

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WithOwnerReferences is obj with metadata.ownerReferences set to refs,
// sharing every other value with obj: the child as the loop applies it,
// which the comparison with the observed child, the dry run, the apply
// and a preview's local apply (internal/syncrequest) only read and marshal. It copies the top level and the metadata
// maps, where a deep copy of the child and the converter's reflection
// (SetOwnerReferences) were a twentieth of what the loop allocated for
// each child it applied, and as much again for each child it compared.
// The references are the maps SetOwnerReferences would store, so the
// body's JSON, which the unchanged-children cache digests, is the same.
func WithOwnerReferences(obj *unstructured.Unstructured, refs []metav1.OwnerReference) *unstructured.Unstructured {
	meta, ok := obj.Object["metadata"].(map[string]interface{})
	if !ok {
		c := obj.DeepCopy()
		c.SetOwnerReferences(refs)
		return c
	}
	list := make([]interface{}, len(refs))
	for i, r := range refs {
		m := map[string]interface{}{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
		if r.Controller != nil {
			m["controller"] = *r.Controller
		}
		if r.BlockOwnerDeletion != nil {
			m["blockOwnerDeletion"] = *r.BlockOwnerDeletion
		}
		list[i] = m
	}
	out := maps.Clone(obj.Object)
	meta = maps.Clone(meta)
	meta["ownerReferences"] = list
	out["metadata"] = meta
	return &unstructured.Unstructured{Object: out}
}
