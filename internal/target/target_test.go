package target

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// TestOnlyTheInformersAskForUncompressedAnswers: kube-apiserver gzips a
// watch-list stream, event by event, for a client that accepts gzip. The
// informers' client must not accept it; the clients that write keep Go's
// default, under which large lists may come compressed.
func TestOnlyTheInformersAskForUncompressedAnswers(t *testing.T) {
	var mu sync.Mutex
	acceptEncoding := map[string]string{}
	config := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	cluster, err := New(config)
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

// TestEventsTravelInProtobuf: the Events the loop records reach
// kube-apiserver through client-go's Event sink, whose create is built by
// hand with the clientset's content type rather than by a generated
// method (which would send protobuf whatever the config says). They are
// sent in protobuf, protobuf asked for first, as Kubernetes' components
// send theirs, by the server's own clients and by those acting as a
// controller's ServiceAccount; the dynamic client, which also writes the
// CRDs no protobuf encoding exists for, keeps JSON.
func TestEventsTravelInProtobuf(t *testing.T) {
	type seen struct{ contentType, accept, event string }
	var mu sync.Mutex
	requests := map[string]seen{}
	config := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := seen{contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept")}
		if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
			if e, ok := obj.(*corev1.Event); ok {
				s.event = e.Name
			}
		}
		mu.Lock()
		requests[r.Header.Get("Impersonate-User")+" "+r.Method+" "+r.URL.Path] = s
		mu.Unlock()
		// Answered in JSON, which the clients also accept.
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"ns","resourceVersion":"1"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"1"}}`))
	}))
	cluster, err := New(config)
	if err != nil {
		t.Fatal(err)
	}
	as, err := cluster.As("team", "bot")
	if err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Reason: "ChildCreated"}
	for _, kube := range []kubernetes.Interface{cluster.Kube, as.Kube} {
		sink := &typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")}
		if _, err := sink.Create(event); err != nil {
			t.Fatalf("the Event sink's create: %v", err)
		}
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := cluster.Dynamic.Resource(configMaps).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	protobuf := runtime.ContentTypeProtobuf
	for _, user := range []string{"", "system:serviceaccount:team:bot"} {
		got := requests[user+" POST /api/v1/namespaces/ns/events"]
		if got.contentType != protobuf || got.event != "e" {
			t.Errorf("the Event of %q was sent as %q (decoded as an Event named %q), want %s", user, got.contentType, got.event, protobuf)
		}
		if want := protobuf + "," + runtime.ContentTypeJSON; got.accept != want {
			t.Errorf("the Event create of %q asked for %q, want %q", user, got.accept, want)
		}
	}
	if got := requests[" GET /api/v1/namespaces/ns/configmaps/a"]; got.accept != runtime.ContentTypeJSON {
		t.Errorf("the dynamic client asked for %q, want %s", got.accept, runtime.ContentTypeJSON)
	}
}

// BenchmarkEventCreate: what the Event sink's create of a loop's Event
// costs this server, in JSON (the clientset's default for requests built
// by hand) and in protobuf (builtinTypesConfig), against a server that
// answers in the encoding asked for.
func BenchmarkEventCreate(b *testing.B) {
	now := metav1.Now()
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-41.18c0ffee00000000", Namespace: "bench"},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Hello", Namespace: "bench", Name: "hello-41", UID: "0f6ee3f5-9d1c-4a52-9a64-3f4c9b3c2f11",
			APIVersion: "example.com/v1", ResourceVersion: "123456",
		},
		Reason:         "ChildCreated",
		Message:        "created ConfigMap hello-41-0, hello-41-1, hello-41-2, hello-41-3, hello-41-4 and 5 more",
		Source:         corev1.EventSource{Component: "composite-apiserver"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: corev1.EventTypeNormal,
	}
	encoded := map[string][]byte{}
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), event)
		if err != nil {
			b.Fatal(err)
		}
		encoded[mediaType] = data
	}
	server := tlsServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mediaType := r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", mediaType)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(encoded[mediaType])
	}))
	for _, v := range []struct{ name, contentType string }{{"json", runtime.ContentTypeJSON}, {"protobuf", ""}} {
		b.Run(v.name, func(b *testing.B) {
			config := rest.CopyConfig(server)
			config.ContentType, config.QPS = v.contentType, -1
			cluster, err := New(config)
			if err != nil {
				b.Fatal(err)
			}
			sink := &typedcorev1.EventSinkImpl{Interface: cluster.Kube.CoreV1().Events("")}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sink.Create(event); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// tlsServer serves handler over TLS, as kube-apiserver does (client-go
// gives a client without TLS options Go's default transport, whatever its
// configuration), until the test ends, and returns a client configuration
// that trusts it.
func tlsServer(t testing.TB, handler http.Handler) *rest.Config {
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// builtinTypesConfig fills in protobuf only where the caller chose no
// encoding: a content type or an Accept header set by the caller is kept as
// it was, and the caller's config is not changed.
func TestBuiltinTypesConfigKeepsTheCallersEncoding(t *testing.T) {
	for _, cc := range []rest.ContentConfig{
		{ContentType: runtime.ContentTypeJSON},
		{AcceptContentTypes: runtime.ContentTypeJSON},
		{ContentType: runtime.ContentTypeCBOR, AcceptContentTypes: runtime.ContentTypeCBOR},
	} {
		c := rest.Config{ContentConfig: cc}
		got := builtinTypesConfig(&c)
		if got.ContentType != c.ContentType || got.AcceptContentTypes != c.AcceptContentTypes {
			t.Errorf("the caller's %q / %q became %q / %q", c.ContentType, c.AcceptContentTypes, got.ContentType, got.AcceptContentTypes)
		}
	}
	unset := &rest.Config{Host: "https://example.com"}
	got := builtinTypesConfig(unset)
	if want := runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON; got.ContentType != runtime.ContentTypeProtobuf || got.AcceptContentTypes != want {
		t.Errorf("no encoding chosen gave %q / %q, want %q / %q", got.ContentType, got.AcceptContentTypes, runtime.ContentTypeProtobuf, want)
	}
	if unset.ContentType != "" || unset.AcceptContentTypes != "" {
		t.Errorf("the caller's config was changed: %q / %q", unset.ContentType, unset.AcceptContentTypes)
	}
}
