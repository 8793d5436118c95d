package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/internal/unstructuredjson"
)

// desiredConfigMap is a child as the engine plans it: labels, an owner of
// its own (a hook may set one), data.
func desiredConfigMap() *unstructured.Unstructured {
	data := map[string]interface{}{}
	for i := 0; i < 4; i++ {
		data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d", i)
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{
			"name": "child", "namespace": "ns",
			"labels":          map[string]interface{}{"app": "web", "controller-uid": "1234"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Other", "name": "o", "uid": "u-0"}},
		},
		"data": data,
	}}
}

// ownerRefs are the references the apply sets: the hook's own, then the
// parent's controller reference.
var ownerRefs = []metav1.OwnerReference{
	{APIVersion: "example.com/v1", Kind: "Other", Name: "o", UID: "u-0"},
	{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: "u-1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	{APIVersion: "example.com/v1", Kind: "Parent", Name: "q", UID: "u-2", Controller: ptr.To(false)},
}

// TestWithOwnerReferencesMarshalsAsSetOwnerReferences: the apply body is
// byte for byte what a deep copy with SetOwnerReferences marshalled (the
// unchanged-children cache digests those bytes and compares them with a
// digest of the desired child), and the desired child is left as it was.
func TestWithOwnerReferencesMarshalsAsSetOwnerReferences(t *testing.T) {
	for _, refs := range [][]metav1.OwnerReference{ownerRefs, ownerRefs[1:2], {}} {
		desired := desiredConfigMap()
		before := desired.DeepCopy()
		want := desired.DeepCopy()
		want.SetOwnerReferences(refs)
		wantJSON, err := json.Marshal(want.Object)
		if err != nil {
			t.Fatal(err)
		}
		got := WithOwnerReferences(desired, refs)
		gotJSON, err := json.Marshal(got.Object)
		if err != nil {
			t.Fatal(err)
		}
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("with %d references:\n got %s\nwant %s", len(refs), gotJSON, wantJSON)
		}
		if !equality.Semantic.DeepEqual(desired.Object, before.Object) {
			t.Errorf("with %d references the desired child changed: %v", len(refs), desired.Object)
		}
	}
	// WithOwnerReferences writes each field of a reference itself (the
	// converter's reflection was what it saves): a field a newer
	// apimachinery adds must be added there too, or a hook's reference
	// would lose it.
	if n := reflect.TypeFor[metav1.OwnerReference]().NumField(); n != 6 {
		t.Errorf("metav1.OwnerReference has %d fields, WithOwnerReferences writes 6", n)
	}
	// A child without a metadata map (the engine refuses those) still
	// gets its references, by the deep copy.
	bare := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	if got := WithOwnerReferences(bare, ownerRefs[1:2]).GetOwnerReferences(); len(got) != 1 || got[0].UID != "u-1" {
		t.Errorf("without metadata: got %v", got)
	}
	if _, ok := bare.Object["metadata"]; ok {
		t.Error("without metadata: the desired child changed")
	}
}

// BenchmarkApplyBody is the body of one child's apply: the desired child
// with its owner references, marshalled. "deep-copy" is how Execute built
// it before WithOwnerReferences and unstructuredjson, measured in the same
// run.
func BenchmarkApplyBody(b *testing.B) {
	desired := desiredConfigMap()
	b.Run("deep-copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := desired.DeepCopy()
			c.SetOwnerReferences(ownerRefs[:2])
			if _, err := json.Marshal(c.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("owner-references-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unstructuredjson.Marshal(WithOwnerReferences(desired, ownerRefs[:2]).Object); err != nil {
				b.Fatal(err)
			}
		}
	})
}
