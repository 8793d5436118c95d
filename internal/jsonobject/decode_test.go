package jsonobject

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	kjson "sigs.k8s.io/json"
)

// decodedByKJSON is what the dynamic client's decoder makes of data's
// object, or its error.
func decodedByKJSON(data []byte) (map[string]interface{}, error) {
	content := map[string]interface{}{}
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, &content)
	return content, err
}

// kubeObjects are objects as kube-apiserver writes them, and what else a
// watch may carry: every one must decode in one pass, as the dynamic
// client's decoder decodes it (else the informers fall back to its
// decoder on every event, and the cache shares nothing).
var kubeObjects = []string{
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-3","namespace":"bench-0","uid":"7c2c3d4e-0000-4000-8000-000000000003","resourceVersion":"12343","creationTimestamp":"2026-12-02T16:00:00Z","labels":{"controller-uid":"6b2c3d4e-0000-4000-8000-000000000001"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Hello","name":"p1","uid":"6b2c3d4e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"metacontroller.k8s.io/bench","operation":"Apply","apiVersion":"v1","time":"2026-12-02T16:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},"f:ownerReferences":{"k:{\"uid\":\"6b2c3d4e-0000-4000-8000-000000000001\"}":{}}}}}]},"data":{"index":"3","parent":"p1"}}`,
	`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","generation":7,"annotations":{"a":"caf\u00e9 \"quoted\" back\\slash\/ tab\t nl\n cr\r ff\f bs\b","é":"ü","emoji":"😀"}},"spec":{"replicas":3,"ratio":0.5,"big":9223372036854775807,"bigger":9223372036854775808,"neg":-12,"zero":0,"negzero":-0,"exp":1e3,"Exp":2E-2,"frac":1.0,"list":[],"nested":[[1,[2,{}]],{"a":null}],"empty":{},"nil":null,"yes":true,"no":false,"str":""},"status":{}}`,
	" \t\r\n{ \"spaced\" : [ 1 , 2 ] , \"k\" : { } } \n",
	`{"dup":1,"dup":"last wins","Dup":"case counts"}`,
}

func TestUnmarshalObjectDecodesWhatKubeAPIServerSends(t *testing.T) {
	for _, in := range kubeObjects {
		got, err := DecodeShared([]byte(in))
		if err != nil {
			t.Errorf("DecodeShared(%s): %v, want it decoded in one pass", in, err)
			continue
		}
		want, err := decodedByKJSON([]byte(in))
		if err != nil {
			t.Fatalf("the dynamic client's decoder refuses %s: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeShared(%s) = %#v, want the dynamic client's %#v", in, got, want)
		}
	}
}

func TestUnmarshalObjectLeavesTheRestToTheDynamicClientsDecoder(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `"s"`, `1`, `null`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":1}{}`, `{'a':1}`,
		`{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":+1}`, `{"a":1e400}`, `{"a":NaN}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":[1 2]}`, "{\"a\":\"x\ny\"}", `{"a":"\x"}`, `{"a":"\'"}`,
		`{"a":"\u12"}`, `{"a":"\u12G4"}`, `{"a":"unterminated}`,
		// Decoded by encoding/json, which replaces them: left to it.
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", "{\"\xc3\":1}",
	} {
		if got, err := DecodeShared([]byte(in)); !errors.Is(err, ErrNotDecoded) {
			t.Errorf("DecodeShared(%q) = %#v, %v; want it left to the dynamic client's decoder", in, got, err)
		}
	}
}

func mustDecode(t *testing.T, decode func([]byte) (map[string]interface{}, error), in string) map[string]interface{} {
	t.Helper()
	obj, err := decode([]byte(in))
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return obj
}

// TestDecodedObjectsShareTheirStrings: two children of one parent share
// their keys and their recurring values, so the cache holds them once.
func TestDecodedObjectsShareTheirStrings(t *testing.T) {
	tablesWithoutCollisions(t, kubeObjects[0])
	a, b := mustDecode(t, DecodeShared, kubeObjects[0]), mustDecode(t, DecodeShared, kubeObjects[0])
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	keyOf := func(m map[string]interface{}, k string) string {
		for key := range m {
			if key == k {
				return key
			}
		}
		t.Fatalf("no key %q", k)
		return ""
	}
	if !same(keyOf(a, "apiVersion"), keyOf(b, "apiVersion")) {
		t.Error("the two objects' apiVersion keys are two strings, want one")
	}
	metaA, metaB := a["metadata"].(map[string]interface{}), b["metadata"].(map[string]interface{})
	if !same(metaA["namespace"].(string), metaB["namespace"].(string)) {
		t.Error("the two objects' namespaces are two strings, want one")
	}
	ownerA := metaA["ownerReferences"].([]interface{})[0].(map[string]interface{})
	ownerB := metaB["ownerReferences"].([]interface{})[0].(map[string]interface{})
	if !same(ownerA["uid"].(string), ownerB["uid"].(string)) {
		t.Error("the two objects' owner UIDs are two strings, want one")
	}
}

// TestDecodedObjectsShareTheirMetadata: children with the same labels,
// owner references and managed fields hold one decoded copy of each; a
// different value, or the same bytes under another key, is decoded on its
// own. Children applied a second apart hold two managedFields lists, with
// one copy of the fields both entries own.
func TestDecodedObjectsShareTheirMetadata(t *testing.T) {
	decode := func(in string) map[string]interface{} {
		t.Helper()
		obj, err := DecodeShared([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := decodedByKJSON([]byte(in))
		if !reflect.DeepEqual(obj, want) {
			t.Fatalf("DecodeShared(%s) = %#v, want the dynamic client's %#v", in, obj, want)
		}
		return obj
	}
	meta := func(obj map[string]interface{}) map[string]interface{} {
		return obj["metadata"].(map[string]interface{})
	}
	fieldsOf := func(obj map[string]interface{}) interface{} {
		entry := meta(obj)["managedFields"].([]interface{})[0]
		return entry.(map[string]interface{})["fieldsV1"]
	}
	same := func(a, b interface{}) bool {
		return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	otherFields := strings.Replace(kubeObjects[0], `"f:index":{}`, `"f:other":{}`, 1)
	nextSecond := strings.Replace(kubeObjects[0], `"time":"2026-12-02T16:00:00Z"`, `"time":"2026-12-02T16:00:01Z"`, 1)
	if nextSecond == kubeObjects[0] {
		t.Fatal("the test object has no managedFields entry of 16:00:00")
	}
	tablesWithoutCollisions(t, kubeObjects[0], otherFields, nextSecond)
	first, second := decode(kubeObjects[0]), decode(kubeObjects[0])
	for _, c := range []struct {
		what string
		a, b interface{}
	}{
		{"managedFields", meta(first)["managedFields"], meta(second)["managedFields"]},
		{"fieldsV1", fieldsOf(first), fieldsOf(second)},
		{"labels", meta(first)["labels"], meta(second)["labels"]},
		{"ownerReferences", meta(first)["ownerReferences"], meta(second)["ownerReferences"]},
	} {
		if !same(c.a, c.b) {
			t.Errorf("two children with the same %s hold two copies of them, want one", c.what)
		}
	}
	other := decode(otherFields)
	if same(fieldsOf(first), fieldsOf(other)) {
		t.Error("a child with other fields shares the fieldsV1 of the first")
	}
	later := decode(nextSecond)
	if same(meta(first)["managedFields"], meta(later)["managedFields"]) {
		t.Error("a child applied a second later shares the managedFields list of the first")
	}
	if !same(fieldsOf(first), fieldsOf(later)) {
		t.Error("a child applied a second later holds a copy of the same fieldsV1, want one")
	}
	if again := decode(kubeObjects[0]); !same(fieldsOf(first), fieldsOf(again)) {
		t.Error("the first fieldsV1 is no longer shared after another was decoded")
	}
	obj := decode(`{"spec":{"f:data":{"f:index":{},"f:parent":{}}},"x":{"f:data":{"f:index":{},"f:parent":{}}}}`)
	if same(obj["spec"], obj["x"]) {
		t.Error("values not under a shared key are shared")
	}
	long := `{"metadata":{"labels":{"a":"` + strings.Repeat("x", maxShared) + `"}}}`
	if same(meta(decode(long))["labels"], meta(decode(long))["labels"]) {
		t.Errorf("labels longer than %d bytes are shared", maxShared)
	}
}

// tablesWithoutCollisions gives the decoder, for the test, fresh tables
// whose seeds put every short string and every shared value of inputs in
// a slot of its own. The tables keep the last entry of each slot, so with
// a random seed two strings of one object share a slot about once in a
// hundred runs, and the first is decoded anew where the test wants it
// shared: that is a miss the tables accept by design, not what the tests
// ask.
func tablesWithoutCollisions(t *testing.T, inputs ...string) {
	t.Helper()
	var strs, spans []string
	for _, in := range inputs {
		decoded, err := decodedByKJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		strs = appendShortStrings(strs, decoded)
		spans = append(spans, sharedSpans(in)...)
	}
	oldStrings, oldValues := internedStrings, sharedValues
	t.Cleanup(func() { internedStrings, sharedValues = oldStrings, oldValues })
	for range 1000 {
		internedStrings, sharedValues = newStringTable(), newSubtreeTable()
		if distinctSlots(strs, internedStrings.slot) && distinctSlots(spans, sharedValues.slot) {
			return
		}
	}
	t.Fatal("no seeds in 1,000 put the inputs' strings in slots of their own")
}

// appendShortStrings appends the keys and string values of v the string
// table holds.
func appendShortStrings(strs []string, v interface{}) []string {
	switch v := v.(type) {
	case map[string]interface{}:
		for key, value := range v {
			if len(key) <= maxInterned {
				strs = append(strs, key)
			}
			strs = appendShortStrings(strs, value)
		}
	case []interface{}:
		for _, value := range v {
			strs = appendShortStrings(strs, value)
		}
	case string:
		if len(v) <= maxInterned {
			strs = append(strs, v)
		}
	}
	return strs
}

// sharedSpans are the bytes of in's values under sharedKey's keys, written
// without space after the colon, as kube-apiserver writes them.
func sharedSpans(in string) []string {
	var spans []string
	for _, key := range []string{"labels", "ownerReferences", "managedFields", "fieldsV1"} {
		for rest, at := in, 0; ; rest = rest[at:] {
			i := strings.Index(rest, `"`+key+`":`)
			if i < 0 {
				break
			}
			start := i + len(key) + 3
			if start == len(rest) || (rest[start] != '{' && rest[start] != '[') {
				at = start
				continue
			}
			end, _, ok := skipComposite([]byte(rest), start)
			if !ok {
				break
			}
			spans, at = append(spans, rest[start:end]), end
		}
	}
	return spans
}

// distinctSlots tells whether the distinct values of vs each take a slot
// of their own.
func distinctSlots[S any](vs []string, slot func([]byte) *S) bool {
	taken := map[*S]string{}
	for _, v := range vs {
		s := slot([]byte(v))
		if other, ok := taken[s]; ok && other != v {
			return false
		}
		taken[s] = v
	}
	return true
}

// TestSharedFieldsKeepTheDepthLimit: a fieldsV1 decoded near the top
// is not taken where its nesting would pass maxDepth.
func TestSharedFieldsKeepTheDepthLimit(t *testing.T) {
	// Nested 3,991 deep in under maxShared bytes, so that it is shared.
	inner := `{"a":` + strings.Repeat("[", 3990) + strings.Repeat("]", 3990) + `}`
	shallow := `{"fieldsV1":` + inner + `}`
	if _, err := DecodeShared([]byte(shallow)); err != nil {
		t.Fatalf("a fieldsV1 within the limit: %v", err)
	}
	tooDeep := `{"x":` + strings.Repeat("[", 6100) + `{"fieldsV1":` + inner + `}` + strings.Repeat("]", 6100) + `}`
	if _, err := DecodeShared([]byte(tooDeep)); !errors.Is(err, ErrNotDecoded) {
		t.Errorf("a fieldsV1 seen before, placed beyond the limit: %v, want it left to the dynamic client's decoder", err)
	}
	if _, err := decodedByKJSON([]byte(tooDeep)); err == nil {
		t.Error("the dynamic client's decoder accepts the object beyond the limit; the test's depth is wrong")
	}
}

// TestDecodedObjectsOutliveTheirBytes: the watch reads the next event into
// the buffer an object was decoded from; the object must not change.
func TestDecodedObjectsOutliveTheirBytes(t *testing.T) {
	for _, in := range kubeObjects {
		buf := []byte(in)
		got, err := DecodeShared(buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'x'
		}
		want, _ := decodedByKJSON([]byte(in))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after its bytes were overwritten, the object of %s is %#v", in, got)
		}
	}
}

// FuzzDecode: whatever the decoders decode, sigs.k8s.io/json decodes
// too, into the same map down to the Go types; so what they refuse is
// sigs.k8s.io/json's to decode or refuse, and nothing they accept is
// accepted wrongly. Decode, DecodeShared and DecodeMembers accept the same
// inputs, and DecodeMembers sees each member as written.
func FuzzDecode(f *testing.F) {
	for _, in := range kubeObjects {
		f.Add([]byte(in))
	}
	f.Add([]byte(`{"a":"\u00e9\ud83d\ude00","b":[1,2.5,-3e2,{"c":null}]}`))
	f.Add([]byte(`{"a":{"fieldsV1":{"f:x":{},"k:{\"uid\":\"u\"}":{}}},"b":[{"fieldsV1":{"f:x":{},"k:{\"uid\":\"u\"}":{}}}],"fieldsV1":{"f:x":{}`))
	f.Add([]byte(`{"status":{"a":1},"children":[{"kind":"K"}],"status":{"b":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		shared, err := DecodeShared(data)
		own, ownErr := Decode(data)
		var members []member
		membersErr := DecodeMembers(data, func(key string, value interface{}, raw []byte) error {
			members = append(members, member{key, value, string(raw)})
			return nil
		})
		if (err == nil) != (ownErr == nil) || (err == nil) != (membersErr == nil) {
			t.Fatalf("on %q: DecodeShared %v, Decode %v, DecodeMembers %v; want all to accept or all to refuse", data, err, ownErr, membersErr)
		}
		if err != nil {
			if !errors.Is(err, ErrNotDecoded) {
				t.Fatalf("DecodeShared(%q): %v, want ErrNotDecoded", data, err)
			}
			return
		}
		want, err := decodedByKJSON(data)
		if err != nil {
			t.Fatalf("DecodeShared(%q) = %#v, but sigs.k8s.io/json refuses it: %v", data, shared, err)
		}
		if !reflect.DeepEqual(shared, want) || !reflect.DeepEqual(own, want) {
			t.Fatalf("on %q: DecodeShared = %#v, Decode = %#v; want sigs.k8s.io/json's %#v", data, shared, own, want)
		}
		checkMembers(t, data, members, want)
	})
}

type member struct {
	key   string
	value interface{}
	raw   string
}

// checkMembers: each member's raw bytes decode to its value, the last of
// each key is the object's, and every key of the object was seen.
func checkMembers(t *testing.T, data []byte, members []member, want map[string]interface{}) {
	t.Helper()
	last := map[string]interface{}{}
	for _, m := range members {
		var v interface{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(m.raw), &v); err != nil || !reflect.DeepEqual(v, m.value) {
			t.Fatalf("on %q: member %q's bytes %q decode to %#v (%v), want its value %#v", data, m.key, m.raw, v, err, m.value)
		}
		last[m.key] = m.value
	}
	if !reflect.DeepEqual(last, want) {
		t.Fatalf("on %q: the members' last values are %#v, want the object %#v", data, last, want)
	}
}

func TestDecodeMembersSeesEachMemberAsWritten(t *testing.T) {
	in := `{"status":{"a":1},"children":[{"kind":"K"}], "resyncAfterSeconds" : -0 ,"status":null}`
	var got []member
	err := DecodeMembers([]byte(in), func(key string, value interface{}, raw []byte) error {
		got = append(got, member{key, value, string(raw)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []member{
		{"status", map[string]interface{}{"a": int64(1)}, `{"a":1}`},
		{"children", []interface{}{map[string]interface{}{"kind": "K"}}, `[{"kind":"K"}]`},
		{"resyncAfterSeconds", int64(0), `-0`},
		{"status", nil, `null`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeMembers(%s) saw %#v, want %#v", in, got, want)
	}
	stop := errors.New("stop")
	calls := 0
	err = DecodeMembers([]byte(in), func(string, interface{}, []byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("a member's error: DecodeMembers returned %v after %d calls, want it at once", err, calls)
	}
	if err := DecodeMembers([]byte(`{"a":1} x`), func(string, interface{}, []byte) error { return nil }); !errors.Is(err, ErrNotDecoded) {
		t.Errorf("DecodeMembers of an object followed by more: %v, want ErrNotDecoded", err)
	}
}

// TestDecodeSharesNoMaps: Decode's objects are the caller's to change, so
// no map of one is another's; their strings, which no one can change, are
// shared.
func TestDecodeSharesNoMaps(t *testing.T) {
	tablesWithoutCollisions(t, kubeObjects[0])
	mustDecode(t, DecodeShared, kubeObjects[0])
	a, b := mustDecode(t, Decode, kubeObjects[0]), mustDecode(t, Decode, kubeObjects[0])
	c := mustDecode(t, DecodeShared, kubeObjects[0])
	metaOf := func(m map[string]interface{}) map[string]interface{} { return m["metadata"].(map[string]interface{}) }
	for _, other := range []map[string]interface{}{b, c} {
		if unsafe.StringData(metaOf(a)["namespace"].(string)) != unsafe.StringData(metaOf(other)["namespace"].(string)) {
			t.Error("Decode's namespace is a string of its own, want the one decoded before")
		}
		if reflect.ValueOf(metaOf(a)["labels"]).Pointer() == reflect.ValueOf(metaOf(other)["labels"]).Pointer() {
			t.Error("Decode's labels are another object's map")
		}
	}
	metaOf(a)["labels"].(map[string]interface{})["changed"] = "yes"
	if _, changed := metaOf(c)["labels"].(map[string]interface{})["changed"]; changed {
		t.Error("changing Decode's labels changed a shared object's")
	}
}

// TestDeepLabelsAreNotShared: only members of objects up to a pod
// template's metadata are shared, so that a value nested as
// {"labels":{"labels":…}} is decoded in one pass, not skimmed again at
// every level (R20a).
func TestDeepLabelsAreNotShared(t *testing.T) {
	same := func(in string, path ...string) bool {
		t.Helper()
		var got []interface{}
		for i := 0; i < 2; i++ {
			obj, err := DecodeShared([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			var v interface{} = obj
			for _, k := range path {
				v = v.(map[string]interface{})[k]
			}
			got = append(got, v)
		}
		return reflect.ValueOf(got[0]).Pointer() == reflect.ValueOf(got[1]).Pointer()
	}
	if !same(`{"spec":{"template":{"metadata":{"labels":{"x":"y"}}}}}`, "spec", "template", "metadata", "labels") {
		t.Errorf("a pod template's labels are not shared")
	}
	if same(`{"spec":{"a":{"b":{"c":{"labels":{"x":"y"}}}}}}`, "spec", "a", "b", "c", "labels") {
		t.Errorf("labels of an object 5 deep are shared: each level of a nested {\"labels\":{\"labels\":…}} is skimmed again")
	}
}
