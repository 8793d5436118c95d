// Command hook is the example's sync hook, written with pkg/hookapi: for a
// Hello it returns one ConfigMap holding the greeting, and says in the
// Hello's status whether the ConfigMap exists yet.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func sync(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	name := req.Parent.GetName()
	greeting, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "greeting")
	child := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]interface{}{"name": name + "-greeting", "labels": map[string]interface{}{"app": name}},
		"data":       map[string]interface{}{"greeting": greeting},
	}}
	_, exists := req.Children["ConfigMap.v1"][name+"-greeting"]
	return &hookapi.SyncHookResponse{
		Status:   map[string]interface{}{"configMapReady": exists},
		Children: []*unstructured.Unstructured{child},
	}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "address to serve the hook on")
	flag.Parse()
	http.Handle("/sync", hookapi.SyncHandler(hookapi.SyncHookFunc(sync)))
	log.Printf("hello hook listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
