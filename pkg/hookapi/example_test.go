package hookapi_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

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

// A decorator hook that labels every object it decorates with its
// namespace's team and gives it a Secret attachment; when the object goes
// (the finalize hook, req.Finalizing), it asks for no attachment and lets
// the object go. The server below plays composite-apiserver's part: it
// POSTs the request a DecoratorController's sync hook receives.
func ExampleDecoratorHandler() {
	hook := hookapi.DecoratorHookFunc(func(ctx context.Context, req *hookapi.DecoratorHookRequest) (*hookapi.DecoratorHookResponse, error) {
		if req.Finalizing {
			return &hookapi.DecoratorHookResponse{Finalized: true}, nil
		}
		team := "team-" + req.Object.GetNamespace()
		token := &unstructured.Unstructured{}
		token.SetAPIVersion("v1")
		token.SetKind("Secret")
		token.SetName(req.Object.GetName() + "-token")
		return &hookapi.DecoratorHookResponse{
			Labels:      map[string]*string{"team": &team},
			Attachments: []*unstructured.Unstructured{token},
		}, nil
	})
	server := httptest.NewServer(hookapi.DecoratorHandler(hook))
	defer server.Close()

	request := `{"object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}}, "attachments": {}}`
	resp, err := http.Post(server.URL, "application/json", strings.NewReader(request))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(string(answer))
	// Output:
	// 200 OK
	// {"labels":{"team":"team-shop"},"annotations":null,"status":null,"attachments":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"web-token"}}],"resyncAfterSeconds":0,"finalized":false}
}
