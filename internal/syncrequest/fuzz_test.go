package syncrequest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/internal/hooks"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// FuzzSyncRequest previews any bytes as a /sync request's inline parent and
// children, with a hook that echoes the observed children back as desired:
// the answer is a result, a 400 for the request or a 502 for the hook's
// answer, never a panic or another error (which the API would turn into a
// 500).
func FuzzSyncRequest(f *testing.F) {
	for _, s := range [][2]string{
		{`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"p"}}}}`,
			`{"ConfigMap.v1":{"a":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"p"}},"data":{"x":"1"}}}}`},
		{`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p"}}`, `{"Secret.v1":{"s":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"kube-system"}}}}`},
		{`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","uid":"u","finalizers":["x"],"deletionTimestamp":"2020-01-01T00:00:00Z"}}`, `{"ConfigMap.v1":{"a":null}}`},
		{`{"apiVersion":"example.com/v2","kind":"Hello"}`, ``},
		{`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","labels":{"a":1}}}`, `[]`},
		{`[]`, `{"x":{"y":{"z":[[[[[[[[[]]]]]]]]]}}}`},
		{"\xff", "\xfe"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Children map[string]map[string]interface{} `json:"children"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var children []interface{}
		for _, group := range req.Children {
			for _, obj := range group {
				children = append(children, obj)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]interface{}{"status": map[string]interface{}{"ok": true}, "children": children})
	}))
	f.Cleanup(hook.Close)
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "fuzz", UID: "uid-cc", Generation: 1},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Hooks:          &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(hook.URL + "/sync")}}},
		},
	}
	ctx := context.Background()
	r := NewRunner(ctx, nil, nil, hooks.Destinations{})
	f.Fuzz(func(t *testing.T, parent, children []byte) {
		req := &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{Raw: parent}}}
		if len(children) > 0 {
			req.Spec.Children = &runtime.RawExtension{Raw: children}
		}
		_, err := r.Run(ctx, cc, req, true)
		if err == nil {
			return
		}
		status, ok := err.(apierrors.APIStatus)
		if !ok {
			t.Fatalf("error %v is no API status: the API would answer 500", err)
		}
		if code := status.Status().Code; code != 400 && code != 502 {
			t.Fatalf("answer %d %s: %v, want 400 or 502", code, status.Status().Reason, err)
		}
	})
}
