package hookapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/unstructuredjson"
)

// RelativeObjectMap holds objects by type and then by key, the shape of the
// children and related fields of a sync request:
//
//	{"Pod.v1": {"web-0": {...}}, "Deployment.apps/v1": {"web": {...}}}
//
// The outer key is GroupKey of the objects' apiVersion and kind; the inner key
// is ObjectKey (or RelativeObjectKey) for the hook version.
type RelativeObjectMap map[string]map[string]*unstructured.Unstructured

// GroupKey is the outer key of a RelativeObjectMap, "<Kind>.<apiVersion>",
// e.g. "Pod.v1" or "Deployment.apps/v1".
func GroupKey(apiVersion, kind string) string {
	return kind + "." + apiVersion
}

// ObjectKey is the inner key of obj in a RelativeObjectMap for a hook
// version: its name for v1, and "namespace/name" for v2 (just the name for a
// cluster-scoped object). With a cluster-scoped parent, v1 keys namespaced
// objects by "namespace/name"; use RelativeObjectKey for that case.
func ObjectKey(version v1alpha1.HookVersion, obj metav1.Object) string {
	if version == v1alpha1.HookVersionV2 && obj.GetNamespace() != "" {
		return obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetName()
}

// RelativeObjectKey is the inner key of obj exactly as Metacontroller computes
// it for a parent. v1 keys are relative to the parent: the name, except for a
// namespaced object under a cluster-scoped parent, which needs its namespace
// to be unique. v2 keys do not depend on the parent.
func RelativeObjectKey(version v1alpha1.HookVersion, parent, obj metav1.Object) string {
	if version != v1alpha1.HookVersionV2 && parent != nil && parent.GetNamespace() == "" && obj.GetNamespace() != "" {
		return obj.GetNamespace() + "/" + obj.GetName()
	}
	return ObjectKey(version, obj)
}

// InitGroup makes sure the group for apiVersion and kind exists, so that a
// child type without objects is sent as {} as Metacontroller does, and a hook
// can tell "no children of this type" from "type not watched".
func (m RelativeObjectMap) InitGroup(apiVersion, kind string) {
	key := GroupKey(apiVersion, kind)
	if m[key] == nil {
		m[key] = map[string]*unstructured.Unstructured{}
	}
}

// Insert adds obj under its GroupKey and ObjectKey for version, replacing an
// object with the same keys.
func (m RelativeObjectMap) Insert(version v1alpha1.HookVersion, obj *unstructured.Unstructured) {
	m.insert(ObjectKey(version, obj), obj)
}

// InsertRelative adds obj under its GroupKey and RelativeObjectKey for
// version and parent, replacing an object with the same keys.
func (m RelativeObjectMap) InsertRelative(version v1alpha1.HookVersion, parent metav1.Object, obj *unstructured.Unstructured) {
	m.insert(RelativeObjectKey(version, parent, obj), obj)
}

func (m RelativeObjectMap) insert(key string, obj *unstructured.Unstructured) {
	m.InitGroup(obj.GetAPIVersion(), obj.GetKind())
	m[GroupKey(obj.GetAPIVersion(), obj.GetKind())][key] = obj
}

// List returns all objects, sorted by group key and then object key, so that
// callers iterating it behave the same on every run.
func (m RelativeObjectMap) List() []*unstructured.Unstructured {
	groups := make([]string, 0, len(m))
	n := 0
	for g, objs := range m {
		groups = append(groups, g)
		n += len(objs)
	}
	sort.Strings(groups)
	list := make([]*unstructured.Unstructured, 0, n)
	for _, g := range groups {
		keys := make([]string, 0, len(m[g]))
		for k := range m[g] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if obj := m[g][k]; obj != nil {
				list = append(list, obj)
			}
		}
	}
	return list
}

// MarshalJSON encodes a nil map, and nil groups inside it, as {} rather than
// null: Metacontroller always sends objects here, and hooks written against
// it index into the map without checking for null.
//
// It writes what encoding/json writes for the same map (keys sorted, HTML
// escaped) but encodes each object's content once: through the map and
// Unstructured's own MarshalJSON, encoding/json would encode it, and then
// scan and copy the result again, as it does every Marshaler's output. A
// sync request's observed children are most of its bytes, and every hook
// call of the loop sends them.
func (m RelativeObjectMap) MarshalJSON() ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, 1024))
	// An Encoder writes into buf from encoding/json's pooled buffers, where
	// json.Marshal would return a new slice per object to copy.
	if err := m.writeJSON(buf, json.NewEncoder(buf), nil); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeJSON writes MarshalJSON's bytes to buf through enc, which writes
// into buf; the objects' from encodings when set.
func (m RelativeObjectMap) writeJSON(buf *bytes.Buffer, enc *json.Encoder, encodings *Encodings) error {
	buf.WriteByte('{')
	for i, g := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeKey(buf, g); err != nil {
			return err
		}
		buf.WriteByte('{')
		for j, k := range slices.Sorted(maps.Keys(m[g])) {
			if j > 0 {
				buf.WriteByte(',')
			}
			if err := writeKey(buf, k); err != nil {
				return err
			}
			obj := m[g][k]
			var err error
			switch {
			case obj == nil:
				buf.WriteString("null")
			case encodings != nil:
				err = encodings.write(buf, enc, obj)
			default:
				err = encodeObject(buf, enc, obj.Object)
			}
			if err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte('}')
	return nil
}

// writeKey writes key, JSON-encoded as encoding/json encodes a map key,
// and a colon.
func writeKey(buf *bytes.Buffer, key string) error {
	data, err := unstructuredjson.Append(buf.AvailableBuffer(), key)
	if err != nil {
		return err
	}
	buf.Write(data)
	buf.WriteByte(':')
	return nil
}
