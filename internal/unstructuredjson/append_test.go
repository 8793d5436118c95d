package unstructuredjson

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	sigsjson "sigs.k8s.io/json"
)

// sameAsMarshal fails unless Append writes json.Marshal's bytes for v, or
// fails where it fails.
func sameAsMarshal(t testing.TB, v interface{}) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Append([]byte("prefix"), v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, json.Marshal's %v", v, err, wantErr)
	}
	if err != nil {
		if string(got) != "prefix" {
			t.Fatalf("%#v: on an error dst became %q", v, got)
		}
		return
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%#v:\n got %s\nwant prefix%s", v, got, want)
	}
}

// configMap is a child as the loop's informer holds it.
const configMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-3","namespace":"bench-0","uid":"7c2c3d4e-0000-4000-8000-000000000003",
	"resourceVersion":"12343","creationTimestamp":"2026-12-02T16:00:00Z","labels":{"controller-uid":"6b2c3d4e-0000-4000-8000-000000000001"},
	"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Hello","name":"p1","uid":"6b2c3d4e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}],
	"managedFields":[{"manager":"metacontroller.k8s.io/bench","operation":"Apply","apiVersion":"v1","time":"2026-12-02T16:00:00Z","fieldsType":"FieldsV1",
	"fieldsV1":{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},
	"f:ownerReferences":{"k:{\"uid\":\"6b2c3d4e-0000-4000-8000-000000000001\"}":{}}}}}]},"data":{"index":"3","parent":"p1"}}`

func decoded(t testing.TB, data string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(data), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAppendIsMarshal(t *testing.T) {
	cyclic := map[string]interface{}{}
	cyclic["self"] = cyclic
	many := map[string]interface{}{}
	for _, k := range []string{"q", "b", "z", "a", "y", "c", "x", "d", "w", "e", "v", "f", "u", "g", "t", "h", "s", "i", "r", "j"} {
		many[k] = k
	}
	for name, v := range map[string]interface{}{
		"a ConfigMap":                    decoded(t, configMap),
		"nil":                            nil,
		"nil map":                        map[string]interface{}(nil),
		"nil slice":                      []interface{}(nil),
		"empty":                          map[string]interface{}{"m": map[string]interface{}{}, "l": []interface{}{}, "s": ""},
		"more keys than the stack holds": many,
		"escapes":                        map[string]interface{}{"<a&b>": "\"\\\b\f\n\r\t\x00\x1f\x7f<>&\u2028\u2029 é 日本 \xff\xfe ok", "\xc3": "\xe2\x80"},
		"numbers": []interface{}{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 0.0, math.Copysign(0, -1), 1.5, -2.25e-7,
			1e-6, 9.999999e-7, 1e20, 1e21, 123456789012345678901234.0, 5e-324, math.MaxFloat64, 3.0, 1e-9},
		"other types": map[string]interface{}{"int": 3, "uint8": uint8(7), "float32": float32(1.1), "strings": map[string]string{"b": "<", "a": "x"},
			"number": json.Number("12.5"), "raw": json.RawMessage(`{"z": 1, "a" : [ ]}`), "struct": struct{ A string }{"<"}},
		"NaN":       map[string]interface{}{"x": []interface{}{math.NaN()}},
		"Inf":       math.Inf(-1),
		"a channel": map[string]interface{}{"c": make(chan int)},
		"a cycle":   cyclic,
		"bools":     []interface{}{true, false, nil},
	} {
		t.Run(name, func(t *testing.T) { sameAsMarshal(t, v) })
	}
}

// FuzzAppend: for any JSON, decoded as the watch decoder and client-go
// decode it (integers as int64) and as encoding/json does (float64),
// Append writes json.Marshal's bytes; and so for any string and float.
func FuzzAppend(f *testing.F) {
	f.Add([]byte(configMap), "k", 1.5)
	f.Add([]byte(`{"a":[1,2.5,-0,1e400,"\u2028\ud800",{"<":null}],"b":true}`), "\xff<&>\u2029", 1e-7)
	f.Add([]byte(`[12345678901234567890, 1E21, 0.000001, 1e-320]`), "\x00\t\"\\", -1e21)
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64) {
		var preserved interface{}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &preserved); err == nil {
			sameAsMarshal(t, preserved)
		}
		var plain interface{}
		if err := json.Unmarshal(data, &plain); err == nil {
			sameAsMarshal(t, plain)
		}
		sameAsMarshal(t, map[string]interface{}{s: s})
		sameAsMarshal(t, x)
	})
}

// BenchmarkAppend is one child as the loop encodes it to compare, apply
// and send it: through encoding/json and through Append.
func BenchmarkAppend(b *testing.B) {
	obj := decoded(b, configMap)
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}
