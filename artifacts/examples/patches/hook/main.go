// Command hook serves the patches example's hooks, written with pkg/hookapi:
// the sync hook at /sync returns, for a Greeting, one ConfigMap holding its
// message; the patch hook at /patch adds the message in capitals to every
// ConfigMap it is given, as a JSON merge patch.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func sync(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	name := req.Parent.GetName()
	message, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "message")
	child := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]interface{}{"name": name + "-message", "labels": map[string]interface{}{"app": name}},
		"data":       map[string]interface{}{"message": message},
	}}
	_, exists := req.Children["ConfigMap.v1"][name+"-message"]
	return &hookapi.SyncHookResponse{
		Status:   map[string]interface{}{"configMapReady": exists},
		Children: []*unstructured.Unstructured{child},
	}, nil
}

// shout runs after the sync hook and the team-label patch: it sees the
// ConfigMaps as they left them.
func shout(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
	resp := &hookapi.GenerateResponse{}
	for _, item := range req.Items {
		if item.Ref.Kind != "ConfigMap" {
			continue
		}
		message, _, _ := unstructured.NestedString(item.Object.Object, "data", "message")
		patch, err := json.Marshal(map[string]interface{}{"data": map[string]interface{}{"shout": strings.ToUpper(message)}})
		if err != nil {
			return nil, err
		}
		resp.Items = append(resp.Items, hookapi.GenerateResponseItem{UID: item.UID, PatchType: hookapi.PatchTypeJSONMergePatch, Patch: patch})
	}
	return resp, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "address to serve the hooks on")
	flag.Parse()
	http.Handle("/sync", hookapi.SyncHandler(hookapi.SyncHookFunc(sync)))
	http.Handle("/patch", hookapi.PatchHandler(hookapi.GeneratorFunc(shout)))
	log.Printf("greeting hooks listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
