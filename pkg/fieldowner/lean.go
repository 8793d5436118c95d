package fieldowner

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ControllerManagerPrefix begins the field manager of every
// CompositeController of this server ("metacontroller.k8s.io/<name>").
const ControllerManagerPrefix = "metacontroller.k8s.io/"

// Lean drops from obj, in place, the managedFields entries that change
// detection never reads: every manager's but this server's controllers'
// and Metacontroller's. On objects many managers touch (Deployments,
// Services) those entries are a large part of what a cache holds.
// Comparisons stay correct without them: a field another manager also owns
// looks like ours alone, so dropping it costs one apply that changes
// nothing but ownership, and then the child converges. Hooks see objects
// without those entries too, on both paths.
//
// A child still to be taken over from Metacontroller (fromMetacontroller)
// keeps every entry: TakeoverPatch writes the whole managedFields list,
// since a JSON patch can only address the entries of the server's list by
// index, so it must be made from the whole list, or the takeover would wipe
// kube-controller-manager's, kubectl's and GitOps tools' entries. Keeping
// them here, rather than reading the child again before the takeover,
// costs no request, and the plan and the /sync preview, which apply the
// same patch to this copy, see what the takeover leaves. Such children are
// few, and lean again once taken over.
func Lean(obj *unstructured.Unstructured) {
	entries := obj.GetManagedFields()
	if len(entries) == 0 || fromMetacontroller(obj) {
		return
	}
	kept := entries[:0]
	for _, e := range entries {
		if strings.HasPrefix(e.Manager, ControllerManagerPrefix) {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(entries) {
		return
	}
	if len(kept) == 0 {
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		return
	}
	obj.SetManagedFields(kept)
}
