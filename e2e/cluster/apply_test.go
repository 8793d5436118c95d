package cluster

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// TestChildApplyAnswersMetadataAndRefusesUnknownFields: the loop applies
// children with fieldValidation=Ignore and reads back only their metadata.
// What it keeps (UID, resourceVersion) must be the stored object's, and a
// built-in kind must still refuse a field its schema does not have:
// Ignore only spares kube-apiserver its search for duplicate keys.
func TestChildApplyAnswersMetadataAndRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "child-apply"
	suite.MustCreateNamespace(t, ns)
	meta, err := metadata.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	child := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "c", "namespace": ns},
		"data":     map[string]interface{}{"color": "blue"},
	}}
	stored, err := apply.ChildMetadata(ctx, meta, configMaps, child, "child-apply")
	if err != nil {
		t.Fatal(err)
	}
	live, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.UID != live.UID || stored.ResourceVersion != live.ResourceVersion || live.Data["color"] != "blue" {
		t.Errorf("apply answered uid %q rv %q; stored is uid %q rv %q data %v", stored.UID, stored.ResourceVersion, live.UID, live.ResourceVersion, live.Data)
	}
	if len(live.ManagedFields) != 1 || live.ManagedFields[0].Manager != definition.FieldManager("child-apply") || live.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managedFields = %+v, want one Apply entry of %s", live.ManagedFields, definition.FieldManager("child-apply"))
	}

	unknown := child.DeepCopy()
	unknown.Object["data"] = map[string]interface{}{"color": "green"}
	unknown.Object["spec"] = map[string]interface{}{"replicas": int64(3)}
	if _, err := apply.ChildMetadata(ctx, meta, configMaps, unknown, "child-apply"); err == nil || !strings.Contains(err.Error(), "spec") {
		t.Errorf("an apply with an unknown field answered %v, want it refused naming .spec", err)
	}
	after, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != live.ResourceVersion || after.Data["color"] != "blue" {
		t.Errorf("the refused apply changed the ConfigMap: rv %s -> %s, data %v", live.ResourceVersion, after.ResourceVersion, after.Data)
	}
}
