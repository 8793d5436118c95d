package controllerrevision

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
)

func TestValidate(t *testing.T) {
	valid := func() *metacontroller.ControllerRevision {
		return &metacontroller.ControllerRevision{
			ObjectMeta:  metav1.ObjectMeta{Name: "hellos.example.com-0123", Namespace: "ns"},
			ParentPatch: runtime.RawExtension{Raw: []byte(`{"spec":{"color":"blue"}}`)},
			Children:    []metacontroller.ControllerRevisionChildren{{APIGroup: "example.com", Kind: "Widget", Names: []string{"a"}}},
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(*metacontroller.ControllerRevision)
		want   string
	}{
		{"valid", func(*metacontroller.ControllerRevision) {}, ""},
		{"no parentPatch", func(r *metacontroller.ControllerRevision) { r.ParentPatch.Raw = nil }, "parentPatch: Required"},
		{"parentPatch not an object", func(r *metacontroller.ControllerRevision) { r.ParentPatch.Raw = []byte(`[1]`) }, "parentPatch: Invalid"},
		{"no namespace", func(r *metacontroller.ControllerRevision) { r.Namespace = "" }, "metadata.namespace: Required"},
		{"no kind", func(r *metacontroller.ControllerRevision) { r.Children[0].Kind = "" }, "children[0].kind: Required"},
		{"a kind twice", func(r *metacontroller.ControllerRevision) { r.Children = append(r.Children, r.Children[0]) }, "children[1]: Duplicate"},
		{"an empty name", func(r *metacontroller.ControllerRevision) { r.Children[0].Names = []string{""} }, "children[0].names[0]: Required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := valid()
			tc.modify(r)
			errs := validation.ValidateControllerRevision(r)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("errors %v", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}
