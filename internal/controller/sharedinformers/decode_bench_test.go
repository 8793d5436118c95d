package sharedinformers

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/watchjson"
)

// b2ConfigMap is the i-th B2 child as kube-apiserver sends it on a
// watch: the loop's apply made it, so its managedFields hold the loop's
// entry. Children come ten to a parent, as in B2, each with a name, UID
// and resourceVersion of its own: a decoder that shares recurring strings
// must not be measured on one object repeated.
func b2ConfigMap(i int) *corev1.ConfigMap {
	now := metav1.NewTime(time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC))
	yes := true
	parentName := fmt.Sprintf("p%d", i/10)
	parent := types.UID(fmt.Sprintf("6b2c3d4e-0000-4000-8000-%012d", i/10))
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", parentName, i%10), Namespace: "bench-0", UID: types.UID(fmt.Sprintf("7c2c3d4e-0000-4000-8000-%012d", i)),
			ResourceVersion: strconv.Itoa(12343 + i), CreationTimestamp: now,
			Labels: map[string]string{"controller-uid": string(parent)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: parentName, UID: parent,
				Controller: &yes, BlockOwnerDeletion: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "metacontroller.k8s.io/bench", Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
					`{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},"f:ownerReferences":{"k:{\"uid\":\"` + string(parent) + `\"}":{}}}}`)}}},
		},
		Data: map[string]string{"index": strconv.Itoa(i % 10), "parent": parentName},
	}
}

// eventsPerStream are the events of one watch response in the benchmark:
// an informer's watch lasts minutes, so what counts is the cost of an
// event, not of setting up its stream.
const eventsPerStream = 100

// watchStream is a watch response of eventsPerStream events of a B2
// child in mediaType, as kube-apiserver frames it.
func watchStream(b *testing.B, mediaType string) []byte {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		b.Fatalf("no stream serializer for %s", mediaType)
	}
	var buf bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf), info.StreamSerializer.Serializer)
	for i := range eventsPerStream {
		object, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), b2ConfigMap(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: object}}); err != nil {
			b.Fatal(err)
		}
	}
	return buf.Bytes()
}

// gzipPerEvent is a JSON watch stream as kube-apiserver 1.37 sends a
// watch-list stream to a client that accepts gzip (WatchListCompression):
// each flush a gzip member of its own, from its pool of writers
// (perFlushGzipWriter). Here each event is flushed alone, as kube-apiserver
// does whenever no other event is queued behind it.
func gzipPerEvent(b *testing.B, pool *sync.Pool, jsonStream []byte) []byte {
	var buf bytes.Buffer
	for _, event := range bytes.SplitAfter(jsonStream, []byte("\n")) {
		if len(event) == 0 {
			continue
		}
		gw := pool.Get().(*gzip.Writer)
		gw.Reset(&buf)
		if _, err := gw.Write(event); err != nil {
			b.Fatal(err)
		}
		if err := gw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := gw.Close(); err != nil {
			b.Fatal(err)
		}
		gw.Reset(nil)
		pool.Put(gw)
	}
	return buf.Bytes()
}

// gunzipped is decoder behind a gzip reader, as Go's HTTP client reads a
// response it asked to be compressed.
func gunzipped(b *testing.B, decoder func(io.ReadCloser) *restclientwatch.Decoder) func(io.ReadCloser) *restclientwatch.Decoder {
	return func(r io.ReadCloser) *restclientwatch.Decoder {
		zr, err := gzip.NewReader(r)
		if err != nil {
			b.Fatal(err)
		}
		return decoder(zr)
	}
}

// watchDecoder decodes a watch response in mediaType as a rest client
// whose serializer is serializer does (rest.Request.Watch's own
// construction, from its negotiator).
func watchDecoder(b *testing.B, serializer runtime.NegotiatedSerializer, gv schema.GroupVersion, mediaType string) func(io.ReadCloser) *restclientwatch.Decoder {
	embedded, envelope, framer, err := runtime.NewClientNegotiator(serializer, gv).StreamDecoder(mediaType, nil)
	if err != nil {
		b.Fatal(err)
	}
	return func(r io.ReadCloser) *restclientwatch.Decoder {
		return restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(r), envelope), embedded)
	}
}

// decodeEvents decodes the events of a stream up to the lean Unstructured
// objects the loop's caches hold: a typed object is converted to one by
// runtime.DefaultUnstructuredConverter.
func decodeEvents(b *testing.B, data []byte, decoder func(io.ReadCloser) *restclientwatch.Decoder) []*unstructured.Unstructured {
	d := decoder(io.NopCloser(bytes.NewReader(data)))
	out := make([]*unstructured.Unstructured, 0, eventsPerStream)
	for range eventsPerStream {
		_, obj, err := d.Decode()
		if err != nil {
			b.Fatal(err)
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				b.Fatal(err)
			}
			u = &unstructured.Unstructured{Object: content}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		}
		fieldowner.Lean(u)
		out = append(out, u)
	}
	return out
}

// BenchmarkWatchEventDecode is what an informer of ConfigMaps spends on
// the watch events of B2 children (ns/op is per eventsPerStream events),
// up to the lean objects its cache holds: "json-dynamic-client" as
// client-go's dynamic client decodes them, "json-one-pass" as the loop's
// informers' client (watchjson) does, "protobuf-typed-unstructured" as an
// informer would through a typed client in protobuf and
// runtime.DefaultUnstructuredConverter, and "json-one-pass-gzip-per-event"
// as watchjson's decoders do behind the gzip reader Go's HTTP client puts
// on a watch-list stream kube-apiserver compressed because the client
// accepted gzip (so the informers don't). All four make the same objects.
func BenchmarkWatchEventDecode(b *testing.B) {
	jsonData, pbData := watchStream(b, runtime.ContentTypeJSON), watchStream(b, runtime.ContentTypeProtobuf)
	onePass := watchDecoder(b, watchjson.Config(&rest.Config{}).NegotiatedSerializer, schema.GroupVersion{}, runtime.ContentTypeJSON)
	decoders := []struct {
		name   string
		data   []byte
		decode func(io.ReadCloser) *restclientwatch.Decoder
	}{
		{"json-dynamic-client", jsonData, watchDecoder(b, dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer, schema.GroupVersion{}, runtime.ContentTypeJSON)},
		{"json-one-pass", jsonData, onePass},
		{"json-one-pass-gzip-per-event", gzipPerEvent(b, responsewriters.NewGzipWriterPoolOrDie(), jsonData), gunzipped(b, onePass)},
		{"protobuf-typed-unstructured", pbData, watchDecoder(b, scheme.Codecs.WithoutConversion(), corev1.SchemeGroupVersion, runtime.ContentTypeProtobuf)},
	}
	want := decodeEvents(b, jsonData, decoders[0].decode)
	for _, d := range decoders {
		got := decodeEvents(b, d.data, d.decode)
		for i := range want {
			if !equality.Semantic.DeepEqual(want[i].Object, got[i].Object) {
				b.Fatalf("%s decodes another object:\n%v\nwant %v", d.name, got[i].Object, want[i].Object)
			}
		}
	}
	b.Logf("one event: %d bytes in JSON, %d in protobuf", len(jsonData)/eventsPerStream, len(pbData)/eventsPerStream)
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decodeEvents(b, d.data, d.decode)
			}
		})
	}
}

// BenchmarkWatchEventGzipPerFlush is what kube-apiserver spends to gzip the
// watch events of B2 children for a client that accepts gzip (ns/op is per
// eventsPerStream events, each flushed alone): its own pool of writers, as
// perFlushGzipWriter uses it. The loop's informers don't accept gzip, so it
// doesn't spend it for them.
func BenchmarkWatchEventGzipPerFlush(b *testing.B) {
	jsonData := watchStream(b, runtime.ContentTypeJSON)
	pool := responsewriters.NewGzipWriterPoolOrDie()
	b.Logf("%d events: %d bytes, %d gzipped one by one", eventsPerStream, len(jsonData), len(gzipPerEvent(b, pool, jsonData)))
	b.ReportAllocs()
	for b.Loop() {
		gzipPerEvent(b, pool, jsonData)
	}
}
