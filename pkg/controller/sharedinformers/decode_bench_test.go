package sharedinformers

import (
	"bytes"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/composite-apiserver/composite-apiserver/pkg/fieldowner"
)

// b2ConfigMap is a B2 child as kube-apiserver sends it on a watch: the
// loop's apply made it, so its managedFields hold the loop's entry.
func b2ConfigMap() *corev1.ConfigMap {
	now := metav1.NewTime(time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC))
	yes := true
	parent := types.UID("6b2c3d4e-0000-4000-8000-000000000001")
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p1-3", Namespace: "bench-0", UID: "7c2c3d4e-0000-4000-8000-000000000003",
			ResourceVersion: "12343", CreationTimestamp: now,
			Labels: map[string]string{"controller-uid": string(parent)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: "p1", UID: parent,
				Controller: &yes, BlockOwnerDeletion: &yes}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "metacontroller.k8s.io/bench", Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
					`{"f:data":{"f:index":{},"f:parent":{}},"f:metadata":{"f:labels":{"f:controller-uid":{}},"f:ownerReferences":{"k:{\"uid\":\"6b2c3d4e-0000-4000-8000-000000000001\"}":{}}}}`)}}},
		},
		Data: map[string]string{"index": "3", "parent": "p1"},
	}
}

// eventsPerStream are the events of one watch response in the benchmark:
// an informer's watch lasts minutes, so what counts is the cost of an
// event, not of setting up its stream.
const eventsPerStream = 100

// watchStream is a watch response of eventsPerStream events of a B2
// child in mediaType, as kube-apiserver frames it, and the decoder of
// such a stream a client makes with embedded decoding its objects.
func watchStream(b *testing.B, mediaType string) ([]byte, func(io.ReadCloser, runtime.Decoder) *restclientwatch.Decoder) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		b.Fatalf("no stream serializer for %s", mediaType)
	}
	object, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), b2ConfigMap())
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf), info.StreamSerializer.Serializer)
	for range eventsPerStream {
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: object}}); err != nil {
			b.Fatal(err)
		}
	}
	decoder := func(r io.ReadCloser, embedded runtime.Decoder) *restclientwatch.Decoder {
		frames := info.StreamSerializer.Framer.NewFrameReader(r)
		return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), embedded)
	}
	return buf.Bytes(), decoder
}

// decodeJSON decodes the events of a JSON stream as the loop's dynamic
// informers do, up to the lean object their caches hold (leanTransform).
func decodeJSON(b *testing.B, data []byte, decoder func(io.ReadCloser, runtime.Decoder) *restclientwatch.Decoder) []*unstructured.Unstructured {
	d := decoder(io.NopCloser(bytes.NewReader(data)), unstructured.UnstructuredJSONScheme)
	out := make([]*unstructured.Unstructured, 0, eventsPerStream)
	for range eventsPerStream {
		_, obj, err := d.Decode()
		if err != nil {
			b.Fatal(err)
		}
		u := obj.(*unstructured.Unstructured)
		fieldowner.Lean(u)
		out = append(out, u)
	}
	return out
}

// decodeProtobuf decodes the events of a protobuf stream as an informer
// through a typed client would, and converts each ConfigMap to the lean
// Unstructured the loop's caches hold.
func decodeProtobuf(b *testing.B, data []byte, decoder func(io.ReadCloser, runtime.Decoder) *restclientwatch.Decoder) []*unstructured.Unstructured {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	d := decoder(io.NopCloser(bytes.NewReader(data)), scheme.Codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion))
	out := make([]*unstructured.Unstructured, 0, eventsPerStream)
	for range eventsPerStream {
		_, obj, err := d.Decode()
		if err != nil {
			b.Fatal(err)
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		fieldowner.Lean(u)
		out = append(out, u)
	}
	return out
}

// BenchmarkWatchEventDecode is what an informer of ConfigMaps spends on
// the watch events of B2 children (ns/op is per eventsPerStream events),
// up to the lean objects its cache holds: "json-unstructured" as the
// loop's dynamic informers decode them, "protobuf-typed-unstructured" as
// an informer would through a typed client in protobuf and
// runtime.DefaultUnstructuredConverter. Both make the same objects.
func BenchmarkWatchEventDecode(b *testing.B) {
	jsonData, jsonDecoder := watchStream(b, runtime.ContentTypeJSON)
	pbData, pbDecoder := watchStream(b, runtime.ContentTypeProtobuf)
	fromJSON, fromPB := decodeJSON(b, jsonData, jsonDecoder), decodeProtobuf(b, pbData, pbDecoder)
	if !equality.Semantic.DeepEqual(fromJSON[0].Object, fromPB[0].Object) {
		b.Fatalf("the two decodings differ:\njson     %v\nprotobuf %v", fromJSON[0].Object, fromPB[0].Object)
	}
	b.Logf("one event: %d bytes in JSON, %d in protobuf", len(jsonData)/eventsPerStream, len(pbData)/eventsPerStream)
	b.Run("json-unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeJSON(b, jsonData, jsonDecoder)
		}
	})
	b.Run("protobuf-typed-unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeProtobuf(b, pbData, pbDecoder)
		}
	})
}
