package apiserver

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// TestSyncRequestDecoding: the inline parent and children of a SyncRequest
// are kept raw by the JSON decoder; what can't be decoded must fail the
// decoding of the request (a 400), not the managed-fields tracking that
// runs on it next (which panicked on a number out of range).
func TestSyncRequestDecoding(t *testing.T) {
	decoder := Codecs.UniversalDecoder(metacontroller.SchemeGroupVersion)
	for _, tc := range []struct {
		name, spec, wantErr string
	}{
		{"valid", `{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p"},"spec":{"n":123456789012345678901234567890}},"children":{"ConfigMap.v1":{}}}`, ""},
		{"a number out of range in the parent", `{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p"},"spec":{"n":1e400}}}`, "spec.parent can't be decoded"},
		{"a parent that is a number out of range", `{"parent":-1e400}`, "spec.parent can't be decoded"},
		{"a number out of range in the children", `{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p"}},"children":{"ConfigMap.v1":{"c":{"data":{"n":1e999}}}}}`, "spec.children can't be decoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":` + tc.spec + `}`
			obj, err := runtime.Decode(decoder, []byte(body))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := obj.(*metacontroller.SyncRequest); !ok {
					t.Fatalf("decoded a %T", obj)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
