// Package hookapi is the versioned wire contract between composite-apiserver
// and the hooks of a CompositeController, and a small SDK for writing hooks in
// Go.
//
// The types encode to exactly the JSON Metacontroller sends and expects, so a
// hook written for Metacontroller's CompositeController works unchanged, and
// a hook written with this package works under Metacontroller. The finalize
// hook uses the sync types with Finalizing set.
//
// Patch hooks (spec.hooks.patches[].webhook) have a contract of their own,
// Cluster API's GeneratePatches: a GenerateRequest carries the variables
// (builtin.controller, builtin.parent) and every desired child with an opaque
// uid, a ref and builtin.child; the GenerateResponse has a JSONPatch or
// JSONMergePatch per child to change.
//
// SyncHook, CustomizeHook and Generator decouple the engine from where a hook
// runs: over HTTP (internal/hooks implements all three) or in-process through
// SyncHookFunc, CustomizeHookFunc and GeneratorFunc. SyncHandler,
// CustomizeHandler and PatchHandler serve an in-process hook over HTTP:
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
