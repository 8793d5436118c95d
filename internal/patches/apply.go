package patches

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/composite-apiserver/composite-apiserver/internal/diffline"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// apply applies a generator's answer to children (refs and uids are
// theirs) and returns the patched children and what changed. Children no
// item names are returned as they are. Every problem of the answer is
// collected into one *InvalidAnswerError; nothing is returned with it.
func apply(children []*unstructured.Unstructured, refs []hookapi.ObjectRef, uids map[string]int, resp *hookapi.GenerateResponse) ([]*unstructured.Unstructured, []Change, error) {
	if resp == nil {
		return nil, nil, &InvalidAnswerError{Problems: []string{"the generator returned no response"}}
	}
	var problems []string
	problem := func(format string, args ...interface{}) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	out := append([]*unstructured.Unstructured(nil), children...)
	diffs := make([][]string, len(children))
	answered := make(map[string]int, len(resp.Items))
	for i, item := range resp.Items {
		idx, ok := uids[item.UID]
		if !ok {
			problem("items[%d]: uid %q is not the uid of a child of the request; a patch can't add children", i, item.UID)
			continue
		}
		desc := fmt.Sprintf("items[%d] (%s)", i, describeRef(refs[idx]))
		if j, dup := answered[item.UID]; dup {
			problem("%s: uid %q is answered again, after items[%d]", desc, item.UID, j)
			continue
		}
		answered[item.UID] = i
		patched, err := applyPatch(out[idx], item)
		if err != nil {
			problem("%s: %v", desc, err)
			continue
		}
		for _, p := range identityChanges(refs[idx], patched) {
			problem("%s: %s", desc, p)
		}
		// A patch that changes nothing leaves the child as it was.
		if d := Diff(children[idx].Object, patched.Object); len(d) > 0 {
			out[idx], diffs[idx] = patched, d
		}
	}
	if len(problems) > 0 {
		return nil, nil, &InvalidAnswerError{Problems: problems}
	}
	var changes []Change
	for i, d := range diffs {
		if len(d) > 0 {
			changes = append(changes, Change{Ref: refs[i], Diff: d})
		}
	}
	return out, changes, nil
}

// applyPatch applies one item's patch to a copy of obj.
func applyPatch(obj *unstructured.Unstructured, item hookapi.GenerateResponseItem) (*unstructured.Unstructured, error) {
	patch := bytes.TrimSpace(item.Patch)
	if len(patch) == 0 || bytes.Equal(patch, []byte("null")) {
		return nil, fmt.Errorf("has no patch")
	}
	doc, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("can't encode the child: %w", err)
	}
	switch item.PatchType {
	case hookapi.PatchTypeJSONPatch:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, fmt.Errorf("its JSONPatch is not an RFC 6902 JSON patch: %v", err)
		}
		if doc, err = p.Apply(doc); err != nil {
			return nil, fmt.Errorf("its JSONPatch does not apply: %v", err)
		}
	case hookapi.PatchTypeJSONMergePatch:
		if patch[0] != '{' {
			// RFC 7386 would replace the whole child with it.
			return nil, fmt.Errorf("its JSONMergePatch is not a JSON object")
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, fmt.Errorf("its JSONMergePatch does not apply: %v", err)
		}
	case "":
		return nil, fmt.Errorf("has no patchType: must be %s or %s", hookapi.PatchTypeJSONPatch, hookapi.PatchTypeJSONMergePatch)
	default:
		return nil, fmt.Errorf("patchType %q is not supported: must be %s or %s", item.PatchType, hookapi.PatchTypeJSONPatch, hookapi.PatchTypeJSONMergePatch)
	}
	var v interface{}
	if err := utiljson.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("the patched child does not decode: %v", err)
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("the patched child is %s, not an object", jsonKind(v))
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// identityChanges says how patched is no longer the child ref names. The
// plan keys children by these, so a patch that changed one would create a
// child and delete another, or put one where the sync hook did not.
func identityChanges(ref hookapi.ObjectRef, patched *unstructured.Unstructured) []string {
	var out []string
	for _, f := range []struct {
		field       string
		before, now interface{}
	}{
		{"apiVersion", ref.APIVersion, field(patched.Object, "apiVersion")},
		{"kind", ref.Kind, field(patched.Object, "kind")},
		{"metadata.name", ref.Name, field(patched.Object, "metadata", "name")},
		{"metadata.namespace", ref.Namespace, field(patched.Object, "metadata", "namespace")},
	} {
		if f.now != f.before {
			now := "removes it"
			if f.now != "" {
				now = "sets it to " + diffline.Render(f.now)
			}
			out = append(out, fmt.Sprintf("the patch changes %s: it is %q and the patch %s; a patch may not change a child's apiVersion, kind, name or namespace", f.field, f.before, now))
		}
	}
	return out
}

// field is the value at path, "" when unset.
func field(obj map[string]interface{}, path ...string) interface{} {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found {
		return ""
	}
	return v
}

func jsonKind(v interface{}) string {
	switch v.(type) {
	case nil:
		return "null"
	case []interface{}:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
