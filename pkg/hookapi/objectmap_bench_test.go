package hookapi

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// b2Children are a B2 parent's observed children: 10 ConfigMaps as the
// loop's informer holds them (lean: only their controller's managedFields
// entry).
func b2Children() RelativeObjectMap {
	m := RelativeObjectMap{}
	for i := range 10 {
		cm := &unstructured.Unstructured{}
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-%d","namespace":"bench-0","uid":"7c2c3d4e-0000-4000-8000-00000000000%d",
			"resourceVersion":"1234%d","creationTimestamp":"2026-12-02T16:00:00Z","labels":{"controller-uid":"6b2c3d4e-0000-4000-8000-000000000001"},
			"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Hello","name":"p1","uid":"6b2c3d4e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}],
			"managedFields":[{"manager":"metacontroller.k8s.io/bench","operation":"Apply","apiVersion":"v1","time":"2026-12-02T16:00:00Z","fieldsType":"FieldsV1",
			"fieldsV1":{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},
			"f:ownerReferences":{"k:{\"uid\":\"6b2c3d4e-0000-4000-8000-000000000001\"}":{}}}}}]},"data":{"index":"%d","parent":"p1"}}`, i, i, i, i)
		if err := json.Unmarshal([]byte(data), &cm.Object); err != nil {
			panic(err)
		}
		m.Insert(v1alpha1.HookVersionV1, cm)
	}
	return m
}

// BenchmarkRelativeObjectMapMarshalJSON is the encoding of a sync
// request's observed children, which every hook call of the loop makes,
// inside a request as the hook client encodes it; "through-encoding-json"
// is what MarshalJSON did before it wrote the objects itself (encoding/json
// on the map of Unstructureds).
func BenchmarkRelativeObjectMapMarshalJSON(b *testing.B) {
	m := b2Children()
	plain := map[string]map[string]*unstructured.Unstructured(m)
	for _, c := range []struct {
		name string
		v    any
	}{{"MarshalJSON", m}, {"through-encoding-json", plain}} {
		b.Run(c.name, func(b *testing.B) {
			req := struct {
				Children any `json:"children"`
			}{c.v}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// MarshalJSON writes, byte for byte, what encoding/json writes for the
// same objects through Unstructured's MarshalJSON, nil groups as {}.
func TestRelativeObjectMapMarshalJSONIsEncodingJSONs(t *testing.T) {
	m := b2Children()
	odd := obj("v1", "Secret", "ns", "a<b>&c")
	odd.Object["data"] = map[string]interface{}{"x": "<script>&\u2028", "n": int64(3), "f": 1.5, "l": []interface{}{true, nil}}
	m.Insert(v1alpha1.HookVersionV2, odd)
	m["Empty.v1"] = nil
	m["Nil.v1"] = map[string]*unstructured.Unstructured{"gone": nil, "bare": {}}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	plain := map[string]map[string]*unstructured.Unstructured{}
	for g, objs := range m {
		if objs == nil {
			objs = map[string]*unstructured.Unstructured{}
		}
		plain[g] = objs
	}
	want, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, _ := json.Marshal(RelativeObjectMap(nil)); string(got) != "{}" {
		t.Errorf("nil map: got %s, want {}", got)
	}
}
