package sync

import (
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNormalizeCopiesDecodedObjectsAsTheRoundTripWould: the copy that
// skips encoding gives what encoding and decoding give.
func TestNormalizeCopiesDecodedObjectsAsTheRoundTripWould(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "a", "labels": map[string]interface{}{"x": "y"}},
		"spec": map[string]interface{}{
			"int": int64(3), "whole": float64(3), "negZero": math.Copysign(0, -1), "half": 2.5,
			"limit": float64(1 << 53), "negLimit": -float64(1 << 53), "tiny": 1e-7, "third": 1.0 / 3,
			"list": []interface{}{float64(1), "s", true, nil, map[string]interface{}{}},
			"null": nil,
		},
	}}
	fast, ok := copyDecoded(obj.Object)
	if !ok {
		t.Fatal("a decoded object was not copied")
	}
	rt, err := roundTrip(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, rt.Object) {
		t.Errorf("copy differs from the round trip:\ncopy  %#v\ntrip  %#v", fast, rt.Object)
	}
	// encoding/json writes whole floats beyond 2^53 rounded (2^62 as
	// 4611686018427388000): only the round trip knows what comes back.
	for _, v := range []interface{}{int(1), math.NaN(), math.Inf(1), map[string]string{}, float64(1 << 62), 1e21, float64(math.MinInt64), "\xff", map[string]interface{}{"\xff": "x"}} {
		if _, ok := copyDecoded(map[string]interface{}{"v": v}); ok {
			t.Errorf("%#v was copied; only the round trip may handle it", v)
		}
	}
}

// roundTrip is normalize's slow path.
func roundTrip(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	withInt := &unstructured.Unstructured{Object: map[string]interface{}{"force": int(0)}}
	for k, v := range obj.Object {
		withInt.Object[k] = v
	}
	out, err := normalize(withInt)
	if err != nil {
		return nil, err
	}
	delete(out.Object, "force")
	return out, nil
}
