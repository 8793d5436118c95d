package engine

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// normalize copies obj as a trip through JSON would: numbers get the types
// decoded objects have (int64 for integers, float64 otherwise), whatever an
// in-process hook used, and values JSON can't carry are refused. A webhook's
// answer, decoded from JSON, already has only JSON's types: it is copied
// in one walk, converting what the trip would (a whole float64 becomes an
// int64), which costs a fraction of encoding and decoding every child of
// every sync. Anything else takes the trip itself.
func normalize(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if m, ok := copyJSONMap(obj.Object); ok {
		return &unstructured.Unstructured{Object: m}, nil
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// copyJSONMap copies m when it holds JSON's types alone, and says whether
// it did.
func copyJSONMap(m map[string]interface{}) (map[string]interface{}, bool) {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil, false
		}
		c, ok := copyJSONValue(v)
		if !ok {
			return nil, false
		}
		out[k] = c
	}
	return out, true
}

func copyJSONValue(v interface{}) (interface{}, bool) {
	switch v := v.(type) {
	case nil, bool, int64:
		return v, true
	case string:
		// json.Marshal would replace invalid bytes with U+FFFD.
		return v, utf8.ValidString(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false
		}
		switch {
		case v != math.Trunc(v):
			return v, true
		case math.Abs(v) <= 1<<53:
			// encoding/json writes a whole number as an integer
			// literal, which utiljson reads back as an int64.
			return int64(v), true
		}
		// Beyond 2^53 encoding/json writes the shortest digits that
		// round-trip, padded with zeros: not the same integer.
		return nil, false
	case map[string]interface{}:
		return copyJSONMap(v)
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			c, ok := copyJSONValue(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	default:
		return nil, false
	}
}
