package hookapi

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// A decorator's requests are Metacontroller's: the object, its
// attachments (keyed as the hook version says), and, for the customize
// hook, the DecoratorController as the controller; its answers' null
// labels and annotations are kept as removals.
func TestDecoratorWireFormat(t *testing.T) {
	dc := &v1alpha1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "deco"}}
	object := obj("v1", "ConfigMap", "ns", "c")
	attachments := RelativeObjectMap{}
	attachments.InsertRelative(v1alpha1.HookVersionV2, object, obj("v1", "Secret", "ns", "c-a"))
	data, err := json.Marshal(&DecoratorHookRequest{Controller: dc, Object: object, Attachments: attachments, Related: RelativeObjectMap{}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"controller", "object", "attachments", "related", "finalizing"} {
		if _, ok := got[key]; !ok {
			t.Errorf("request %s lacks %q", data, key)
		}
	}
	if _, ok := got["attachments"].(map[string]any)["Secret.v1"].(map[string]any)["ns/c-a"]; !ok {
		t.Errorf("attachments %v: want Secret.v1 keyed ns/c-a", got["attachments"])
	}

	data, err = json.Marshal(&CustomizeHookRequest{Decorator: dc, Parent: object})
	if err != nil {
		t.Fatal(err)
	}
	var customize struct {
		Controller struct{ Metadata struct{ Name string } } `json:"controller"`
		Parent     map[string]any                           `json:"parent"`
	}
	if err := json.Unmarshal(data, &customize); err != nil || customize.Controller.Metadata.Name != "deco" || customize.Parent == nil {
		t.Errorf("customize request %s: want the DecoratorController as controller (%v)", data, err)
	}

	var resp DecoratorHookResponse
	if err := json.Unmarshal([]byte(`{"labels": {"a": "x", "b": null}, "annotations": {"c": null}}`), &resp); err != nil {
		t.Fatal(err)
	}
	if v, has := resp.Labels["b"]; !has || v != nil || *resp.Labels["a"] != "x" {
		t.Errorf("labels %v: a null value must be kept as a removal", resp.Labels)
	}
	if v, has := resp.Annotations["c"]; !has || v != nil {
		t.Errorf("annotations %v", resp.Annotations)
	}
}
