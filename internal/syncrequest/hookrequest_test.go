package syncrequest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// TestPreviewShowsTheHookRequestThatWasSent: status.hookRequest is the body
// the sync hook received, byte for byte, and what encoding the request
// anew would give.
func TestPreviewShowsTheHookRequestThatWasSent(t *testing.T) {
	var mu sync.Mutex
	var received []byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":{"ok":true},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p-a"},"data":{"k":"v"}}]}`))
	}))
	defer hook.Close()
	cc := definitiontest.ConfigMapController("demo", "0e7c1f1e-0000-4000-8000-0000000000cc", hook.URL+"/sync")
	req := &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{
		Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","namespace":"default"},"spec":{"color":"<blue>"}}`),
	}}}
	st, err := NewRunner(context.Background(), nil, nil, hooks.Destinations{}).Run(context.Background(), cc, req, true)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if st.HookRequest == nil || !bytes.Equal(st.HookRequest.Raw, received) {
		t.Fatalf("status.hookRequest\n%s\nwant what the hook received\n%s", st.HookRequest.Raw, received)
	}
	var sent hookapi.SyncHookRequest
	if err := json.Unmarshal(received, &sent); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(&sent)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, received) {
		t.Errorf("the hook request encoded anew\n%s\ndiffers from the one sent\n%s", again, received)
	}
}
