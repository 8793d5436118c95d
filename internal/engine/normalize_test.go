package engine

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The one-walk copy gives exactly what the trip through JSON gives.
func TestNormalizeIsTheJSONTrip(t *testing.T) {
	trip := func(m map[string]interface{}) map[string]interface{} {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]interface{}{}
		if err := utiljson.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, m := range []map[string]interface{}{
		{"a": int64(3), "b": 3.0, "c": 3.5, "d": -0.0, "e": 1e20, "f": 1e21, "g": 9.3e18, "h": -9.2e18, "i": 1e-7, "third": 1.0 / 3},
		// encoding/json writes whole floats beyond 2^53 with the shortest
		// digits that round-trip: 2^62 comes back as 4611686018427388000.
		{"limit": float64(1 << 53), "negLimit": -float64(1 << 53), "big": float64(1 << 62), "min": float64(math.MinInt64)},
		{"s": "é", "n": nil, "t": true, "l": []interface{}{1.0, "x", map[string]interface{}{"k": 2.5}}},
		{"go": 3, "f32": float32(1.5), "strs": []string{"a"}, "bad": "\xff"},
	} {
		got, err := normalize(&unstructured.Unstructured{Object: m})
		if err != nil {
			t.Fatal(err)
		}
		if want := trip(m); !reflect.DeepEqual(got.Object, want) {
			t.Errorf("normalize(%v)\n got %#v\nwant %#v", m, got.Object, want)
		}
	}
	if _, err := normalize(&unstructured.Unstructured{Object: map[string]interface{}{"nan": math.NaN()}}); err == nil {
		t.Error("NaN was accepted")
	}
}
