package compositecontroller

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// TestServerSideApplyOfTheEarliestShapeOwnsWhatItWasStoredIn: the fields
// kubectl apply --server-side records for a manifest in Metacontroller's
// earliest shape are rewritten into the fields the conversion stored, so
// that the applier owns them (and a later apply prunes what it dropped);
// fields of today's shape are left as they are.
func TestServerSideApplyOfTheEarliestShapeOwnsWhatItWasStoredIn(t *testing.T) {
	applied := `{"f:spec":{
		"f:childResources":{
			"k:{\"apiVersion\":\"v1\",\"resource\":\"\"}":{".":{},"f:apiVersion":{},"f:resources":{},"f:updateStrategy":{"f:method":{}}},
			"k:{\"apiVersion\":\"apps/v1\",\"resource\":\"deployments\"}":{".":{},"f:apiVersion":{},"f:resource":{}}},
		"f:clientConfig":{"f:service":{"f:name":{},"f:namespace":{}}},
		"f:updateStrategy":{},
		"f:hooks":{"f:sync":{"f:path":{}},"f:finalize":{"f:webhook":{"f:url":{}}}},
		"f:parentResource":{"f:apiVersion":{},"f:resource":{}}}}`
	want := `{"f:spec":{
		"f:childResources":{
			"k:{\"apiVersion\":\"apps/v1\",\"resource\":\"deployments\"}":{".":{},"f:apiVersion":{},"f:resource":{}},
			"k:{\"apiVersion\":\"v1\",\"resource\":\"configmaps\"}":{".":{},"f:apiVersion":{},"f:resource":{},"f:updateStrategy":{"f:method":{}}},
			"k:{\"apiVersion\":\"v1\",\"resource\":\"pods\"}":{".":{},"f:apiVersion":{},"f:resource":{},"f:updateStrategy":{"f:method":{}}}},
		"f:hooks":{"f:finalize":{"f:webhook":{"f:url":{}}},"f:sync":{"f:webhook":{"f:path":{},"f:service":{"f:name":{},"f:namespace":{}}}}},
		"f:parentResource":{"f:apiVersion":{},"f:resource":{}}}}`

	cc := &metacontroller.CompositeController{
		ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(applied)}},
		}},
		LegacyShape: &metacontroller.LegacyShape{
			HooksByPath:    []string{"sync"},
			ChildResources: map[string][]string{"v1": {"pods", "configmaps"}},
		},
	}
	translateLegacyManagedFields(cc)

	got, wantSet := &fieldpath.Set{}, &fieldpath.Set{}
	if err := got.FromJSON(bytes.NewReader(cc.ManagedFields[0].FieldsV1.Raw)); err != nil {
		t.Fatal(err)
	}
	if err := wantSet.FromJSON(bytes.NewReader([]byte(want))); err != nil {
		t.Fatal(err)
	}
	if !got.Equals(wantSet) {
		t.Errorf("managed fields:\n%s\nwant:\n%s", got, wantSet)
	}
}
