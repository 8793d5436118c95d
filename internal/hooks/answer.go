package hooks

import (
	"errors"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/jsonobject"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// decodeSyncAnswer decodes a sync (or finalize) hook's answer in one pass
// (jsonobject) into what sigs.k8s.io/json makes of it: a loose hook's
// answer went through encoding/json's reflection, and each child's bytes
// once more through Unstructured.UnmarshalJSON, about half of what a hook
// call cost the loop's CPU.
//
// It says false for anything in the answer that a sync answer is not
// usually, and the caller decodes the same bytes with sigs.k8s.io/json as
// before, which takes them, or refuses them with the same error as ever:
// a member written twice (encoding/json merges two statuses into one map),
// a status that is not an object, a child that is not an object or has no
// kind, a number that is not a float64, a finalized that is not a boolean.
// What it decodes is what sigs.k8s.io/json decodes (FuzzSyncAnswer), the
// sign of a zero resyncAfterSeconds included.
func decodeSyncAnswer(data []byte) (*hookapi.SyncHookResponse, bool) {
	resp := &hookapi.SyncHookResponse{}
	var seen [len(answerMembers)]bool
	err := jsonobject.DecodeMembers(data, func(key string, value interface{}, raw []byte) error {
		i := slices.Index(answerMembers[:], key)
		switch {
		case i < 0:
			// Not a member of the answer: a loose hook's is ignored.
			return nil
		case seen[i]:
			return errNotUsual
		}
		seen[i] = true
		if value == nil {
			// encoding/json leaves a field alone for null: its zero value.
			return nil
		}
		switch key {
		case "status":
			status, ok := value.(map[string]interface{})
			if !ok {
				return errNotUsual
			}
			resp.Status = status
		case "children":
			children, ok := childrenOf(value)
			if !ok {
				return errNotUsual
			}
			resp.Children = children
		case "resyncAfterSeconds":
			// encoding/json parses a number into a float64 from its text:
			// "-0" is a negative zero, which the decoded int64 lost.
			if _, isNumber := value.(int64); !isNumber {
				if _, isNumber = value.(float64); !isNumber {
					return errNotUsual
				}
			}
			seconds, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				return errNotUsual
			}
			resp.ResyncAfterSeconds = seconds
		case "finalized":
			finalized, ok := value.(bool)
			if !ok {
				return errNotUsual
			}
			resp.Finalized = finalized
		}
		return nil
	})
	return resp, err == nil
}

// isEmptyAnswer tells a response nothing was decoded into yet: decoding
// into a filled one, encoding/json would merge the answer's status into
// the status there.
func isEmptyAnswer(r *hookapi.SyncHookResponse) bool {
	return r.Status == nil && r.Children == nil && r.ResyncAfterSeconds == 0 && !r.Finalized
}

// answerMembers are the JSON names of SyncHookResponse's fields.
var answerMembers = [...]string{"status", "children", "resyncAfterSeconds", "finalized"}

// errNotUsual ends decodeSyncAnswer's one pass: sigs.k8s.io/json decodes
// the answer instead.
var errNotUsual = errors.New("not a usual sync answer")

// childrenOf is the children a decoded "children" array holds, as
// encoding/json decodes them through Unstructured.UnmarshalJSON: null is
// a nil child, an object one whose kind is set (Unstructured.UnmarshalJSON
// refuses an object whose apiVersion or kind it can't read). Anything
// else is not usual.
func childrenOf(value interface{}) ([]*unstructured.Unstructured, bool) {
	list, ok := value.([]interface{})
	if !ok {
		return nil, false
	}
	children := make([]*unstructured.Unstructured, len(list))
	for i, item := range list {
		if item == nil {
			continue
		}
		obj, ok := item.(map[string]interface{})
		if !ok {
			return nil, false
		}
		child := &unstructured.Unstructured{Object: obj}
		if child.GroupVersionKind().Kind == "" {
			return nil, false
		}
		children[i] = child
	}
	return children, true
}
