package hookapi_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// A sync hook that gives each parent one ConfigMap and reports how many Pods
// it owns. (The example has no output, so go test compiles it but does not
// run it.)
func ExampleSyncHandler() {
	hook := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		cm.SetName(req.Parent.GetName())
		pods := req.Children[hookapi.GroupKey("v1", "Pod")]
		return &hookapi.SyncHookResponse{
			Status:   map[string]interface{}{"pods": len(pods)},
			Children: []*unstructured.Unstructured{cm},
		}, nil
	})
	http.Handle("/sync", hookapi.SyncHandler(hook))
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// A patch hook that sets every Deployment's replicas to the parent's
// spec.replicas, with a JSON merge patch.
func ExamplePatchHandler() {
	hook := hookapi.GeneratorFunc(func(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
		replicas, _ := req.Variables.Builtin.Parent.Spec["replicas"].(int64)
		resp := &hookapi.GenerateResponse{}
		for _, item := range req.Items {
			if item.Ref.Kind != "Deployment" {
				continue
			}
			resp.Items = append(resp.Items, hookapi.GenerateResponseItem{
				UID:       item.UID,
				PatchType: hookapi.PatchTypeJSONMergePatch,
				Patch:     []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)),
			})
		}
		return resp, nil
	})
	http.Handle("/patch", hookapi.PatchHandler(hook))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
