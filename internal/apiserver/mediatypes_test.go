package apiserver

import (
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

func TestDropPlainProtobuf(t *testing.T) {
	const pom = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	for _, tc := range []struct {
		name, accept, want string
		changed            bool
	}{
		{"no Accept", "", "", false},
		{"JSON only", "application/json", "application/json", false},
		{"protobuf with a JSON fallback, as client-go's metadata client deletes", "application/vnd.kubernetes.protobuf,application/json", "application/json", true},
		{"protobuf only", "application/vnd.kubernetes.protobuf", "", true},
		{"protobuf watch stream", "application/vnd.kubernetes.protobuf;stream=watch, application/json", "application/json", true},
		{"a metadata list keeps protobuf", pom + ",application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			pom + ",application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", false},
		{"CBOR with a JSON fallback", "application/cbor,application/json", "application/cbor,application/json", false},
		{"protobuf before a wildcard", "application/vnd.kubernetes.protobuf, */*", "*/*", true},
		{"a clause that does not parse is left for negotiation", "application/vnd.kubernetes.protobuf;;;=,application/json", "application/vnd.kubernetes.protobuf;;;=,application/json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := dropPlainProtobuf(tc.accept)
			if got != tc.want || changed != tc.changed {
				t.Fatalf("dropPlainProtobuf(%q) = %q, %v; want %q, %v", tc.accept, got, changed, tc.want, tc.changed)
			}
		})
	}
}

// TestEncodableInProtobuf: the check agrees with the protobuf serializer,
// which encodes Kubernetes' generated types and refuses ours.
func TestEncodableInProtobuf(t *testing.T) {
	for _, tc := range []struct {
		obj  runtime.Object
		want bool
	}{
		{&metav1.Status{}, true},
		{&metav1.PartialObjectMetadataList{}, true},
		{&metacontroller.ControllerRevisionList{}, false},
		{&metacontroller.CompositeController{}, false},
		{&metacontroller.SyncRequest{}, false},
	} {
		if got := encodableInProtobuf(tc.obj); got != tc.want {
			t.Errorf("encodableInProtobuf(%T) = %v, want %v", tc.obj, got, tc.want)
		}
		info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), protobufMediaType)
		if !ok {
			t.Fatal("the codec factory has no protobuf serializer")
		}
		err := info.Serializer.Encode(tc.obj, io.Discard)
		if (err == nil) != tc.want {
			t.Errorf("the protobuf serializer encoding %T: %v; the check says %v", tc.obj, err, tc.want)
		}
	}
}
