package watchjson

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/composite-apiserver/composite-apiserver/internal/jsonobject"
)

// b2Parent is a B2 parent as kube-apiserver answers the loop's write of
// its status: created by the benchmark, its status written by the loop.
const b2Parent = `{"apiVersion":"bench.example.com/v1","kind":"Hello","metadata":{"creationTimestamp":"2026-12-02T16:00:00Z","generation":1,"managedFields":[{"apiVersion":"bench.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:children":{}}},"manager":"bench.test","operation":"Update","time":"2026-12-02T16:00:00Z"},{"apiVersion":"bench.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:children":{},"f:observedGeneration":{},"f:phase":{}}},"manager":"metacontroller.k8s.io/bench","operation":"Update","subresource":"status","time":"2026-12-02T16:00:01Z"}],"name":"w1234","namespace":"bench-0","resourceVersion":"123456","uid":"6b2c3d4e-0000-4000-8000-000000001234"},"spec":{"children":10},"status":{"children":10,"observedGeneration":1,"phase":"Ready"}}`

// BenchmarkAnswerDecode is what decoding the answer to a B2 parent's
// status write costs the loop, as the rest client decodes it (its
// negotiated JSON serializer, into an Unstructured): "dynamic-client" as
// client-go's dynamic client decodes it, "one-pass" as the writes' client
// of each identity (NewForConfigAndClient) does. Both make the same object.
func BenchmarkAnswerDecode(b *testing.B) {
	dyn := dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
	decoders := []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"dynamic-client", dyn}, {"one-pass", newNegotiatedSerializer(dyn, jsonobject.Decode)}}
	var want *unstructured.Unstructured
	for _, d := range decoders {
		info, ok := runtime.SerializerInfoForMediaType(d.ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
		if !ok {
			b.Fatalf("%s has no JSON serializer", d.name)
		}
		decode := func() *unstructured.Unstructured {
			obj, _, err := info.Serializer.Decode([]byte(b2Parent), nil, &unstructured.Unstructured{})
			if err != nil {
				b.Fatal(err)
			}
			return obj.(*unstructured.Unstructured)
		}
		if got := decode(); want == nil {
			want = got
		} else if !equality.Semantic.DeepEqual(want, got) {
			b.Fatalf("%s decodes another object:\n%v\nwant %v", d.name, got, want)
		}
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decode()
			}
		})
	}
}
