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
//
// It reads and filters the raw list in place: converting the entries to
// ManagedFieldsEntry and back (GetManagedFields, SetManagedFields)
// re-encodes every fieldsV1, and every watch event of every child passes
// here, most of them with nothing to drop.
func Lean(obj *unstructured.Unstructured) {
	raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields")
	entries, _ := raw.([]interface{})
	drop := 0
	for _, e := range entries {
		m, ok := e.(map[string]interface{})
		if !ok {
			// Not a list the API server writes: left as it is.
			return
		}
		if manager, _ := m["manager"].(string); !strings.HasPrefix(manager, ControllerManagerPrefix) {
			drop++
		}
	}
	if drop == 0 || fromMetacontroller(obj) {
		return
	}
	if drop == len(entries) {
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		return
	}
	kept := make([]interface{}, 0, len(entries)-drop)
	for _, e := range entries {
		if manager, _ := e.(map[string]interface{})["manager"].(string); strings.HasPrefix(manager, ControllerManagerPrefix) {
			kept = append(kept, e)
		}
	}
	obj.Object["metadata"].(map[string]interface{})["managedFields"] = kept
}
