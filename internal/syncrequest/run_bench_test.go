package syncrequest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// BenchmarkRunInlinePreview is one whole standalone preview of an inline
// parent whose hook returns 10 ConfigMaps: what a /sync?dryRun=All costs
// the server besides HTTP and the API machinery.
func BenchmarkRunInlinePreview(b *testing.B) {
	var children []interface{}
	for i := 0; i < 10; i++ {
		children = append(children, map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("p-%d", i), "labels": map[string]interface{}{"app": "p"}},
			"data":     map[string]interface{}{"color": "blue", "item": fmt.Sprint(i)},
		})
	}
	answer, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"ok": true}, "children": children})
	if err != nil {
		b.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer hook.Close()
	cc := definitiontest.ConfigMapController("bench", "0e7c1f1e-0000-4000-8000-0000000000cc", hook.URL+"/sync")
	req := &v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{
		Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p","namespace":"default"},"spec":{"color":"blue"}}`),
	}}}
	ctx := context.Background()
	r := NewRunner(ctx, nil, nil, hooks.Destinations{})
	b.ReportAllocs()
	for b.Loop() {
		st, err := r.Run(ctx, cc, req, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Children) != 10 {
			b.Fatalf("%d children: %q", len(st.Children), st.Warnings)
		}
	}
}
