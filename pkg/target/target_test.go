package target

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestOnlyTheInformersAskForUncompressedAnswers: kube-apiserver gzips a
// watch-list stream, event by event, for a client that accepts gzip. The
// informers' client must not accept it; the clients that write keep Go's
// default, under which large lists may come compressed.
func TestOnlyTheInformersAskForUncompressedAnswers(t *testing.T) {
	var mu sync.Mutex
	acceptEncoding := map[string]string{}
	// TLS, as kube-apiserver's: client-go gives a client without TLS
	// options Go's default transport, whatever its configuration.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		acceptEncoding[r.URL.Path] = r.Header.Get("Accept-Encoding")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = w.Write([]byte(`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"2"}}}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"1"}}`))
	}))
	defer srv.Close()

	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cluster, err := New(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	w, err := cluster.Informers.Resource(configMaps).Namespace("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := <-w.ResultChan(); e.Type != "ADDED" {
		t.Fatalf("the informers' watch got %v, want the ADDED event", e)
	}
	w.Stop()
	if _, err := cluster.Dynamic.Resource(configMaps).Namespace("other").Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if got, ok := acceptEncoding["/api/v1/namespaces/ns/configmaps"]; !ok || got != "" {
		t.Errorf("the informers' watch sent Accept-Encoding %q (sent: %t), want none: kube-apiserver would gzip every event", got, ok)
	}
	if got := acceptEncoding["/api/v1/namespaces/other/configmaps/a"]; got != "gzip" {
		t.Errorf("the dynamic client's get sent Accept-Encoding %q, want Go's default gzip", got)
	}
}
