// Package hookapi is the versioned wire contract between composite-apiserver
// and the hooks of a CompositeController, and a small SDK for writing hooks in
// Go.
//
// The types encode to exactly the JSON Metacontroller sends and expects, so a
// hook written for Metacontroller's CompositeController works unchanged, and
// a hook written with this package works under Metacontroller. The finalize
// hook uses the sync types with Finalizing set.
//
// SyncHook and CustomizeHook decouple the engine from where a hook runs: over
// HTTP (pkg/hooks implements both) or in-process through SyncHookFunc and
// CustomizeHookFunc. SyncHandler and CustomizeHandler serve an in-process
// hook over HTTP:
//
//	func main() {
//		hook := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
//			cm := &unstructured.Unstructured{}
//			cm.SetAPIVersion("v1")
//			cm.SetKind("ConfigMap")
//			cm.SetName(req.Parent.GetName())
//			pods := req.Children[hookapi.GroupKey("v1", "Pod")]
//			return &hookapi.SyncHookResponse{
//				Status:   map[string]interface{}{"pods": len(pods)},
//				Children: []*unstructured.Unstructured{cm},
//			}, nil
//		})
//		http.Handle("/sync", hookapi.SyncHandler(hook))
//		log.Fatal(http.ListenAndServe(":8080", nil))
//	}
package hookapi
