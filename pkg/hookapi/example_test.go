package hookapi_test

import (
	"context"
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
