package hooks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// b2Child is a ConfigMap as a B2 hook answers it, or, with the metadata
// the API server adds, as the loop observes it.
func b2Child(i int, observed bool) map[string]interface{} {
	meta := map[string]interface{}{
		"name": fmt.Sprintf("p-%d", i), "namespace": "ns",
		"labels": map[string]interface{}{"app": "b2"},
	}
	if observed {
		meta["uid"] = fmt.Sprintf("0d6f0c1e-8a36-4c4b-9a53-%012d", i)
		meta["resourceVersion"] = fmt.Sprint(1000 + i)
		meta["creationTimestamp"] = "2026-12-05T06:00:00Z"
		meta["ownerReferences"] = []interface{}{map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Thing", "name": "p", "uid": "5e1f4b7a-0c1d-4a8e-9f0b-3c2d1e0f9a8b",
			"controller": true, "blockOwnerDeletion": true,
		}}
		meta["managedFields"] = []interface{}{map[string]interface{}{
			"manager": "metacontroller.k8s.io/b2", "operation": "Apply", "apiVersion": "v1", "time": "2026-12-05T06:00:00Z",
			"fieldsType": "FieldsV1", "fieldsV1": map[string]interface{}{"f:data": map[string]interface{}{"f:value": map[string]interface{}{}}},
		}}
	}
	return map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
		"data": map[string]interface{}{"value": strings.Repeat("x", 64)},
	}
}

// b2Answer is a B2 hook's answer: the 10 ConfigMaps it wants, its status.
func b2Answer(b *testing.B) string {
	var answer strings.Builder
	answer.WriteString(`{"status":{"observed":10},"children":[`)
	for i := range 10 {
		if i > 0 {
			answer.WriteByte(',')
		}
		data, err := (&unstructured.Unstructured{Object: b2Child(i, false)}).MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		answer.Write(data)
	}
	answer.WriteString(`]}`)
	return answer.String()
}

// BenchmarkSyncAnswerDecode decodes a B2 hook's answer as a loose hook's
// was decoded before (sigs.k8s.io/json, each child through
// Unstructured.UnmarshalJSON) and in one pass (decodeSyncAnswer).
func BenchmarkSyncAnswerDecode(b *testing.B) {
	data := []byte(b2Answer(b))
	b.Run("sigs.k8s.io-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodedByKJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, usual := decodeSyncAnswer(data); !usual {
				b.Fatal("the B2 answer is left to sigs.k8s.io/json")
			}
		}
	})
}

// BenchmarkWebhookSync is one call of a B2 parent's sync hook over HTTP/1.1
// on loopback: the request with its 10 observed ConfigMaps, the answer with
// the 10 it wants, decoded. The server side (httptest) runs in the same
// process, so its allocations count too; they are the same before and
// after a change of the client.
func BenchmarkWebhookSync(b *testing.B) {
	body := b2Answer(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	w := mustNew(b, Config{Webhook: urlHook(srv.URL + "/sync")})

	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]interface{}{"name": "p", "namespace": "ns", "uid": "5e1f4b7a-0c1d-4a8e-9f0b-3c2d1e0f9a8b"},
		"spec":     map[string]interface{}{"children": int64(10)},
	}}
	children := hookapi.RelativeObjectMap{}
	for i := range 10 {
		children.Insert(v1alpha1.HookVersionV1, &unstructured.Unstructured{Object: b2Child(i, true)})
	}
	req := &hookapi.SyncHookRequest{Parent: parent, Children: children}
	b.ReportAllocs()
	for b.Loop() {
		resp, _, err := w.SyncSent(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Children) != 10 {
			b.Fatalf("%d children, want 10", len(resp.Children))
		}
	}
}
