package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// addConversionFuncs registers the hand-written conversions; a registered
// one takes the place of the generated one for its pair of types.
func addConversionFuncs(scheme *runtime.Scheme) error {
	return scheme.AddConversionFunc((*SyncRequest)(nil), (*metacontroller.SyncRequest)(nil), func(a, b interface{}, scope conversion.Scope) error {
		return convertSyncRequestIn(a.(*SyncRequest), b.(*metacontroller.SyncRequest), scope)
	})
}

// convertSyncRequestIn converts a SyncRequest as a client sent it, after
// checking that its inline parent and children decode. The JSON decoder
// keeps them raw, checking only their syntax; a number out of range (1e400)
// then made the managed-fields tracking of the generic server panic while
// converting the request, before the registry saw it. A conversion error
// is a 400 instead.
func convertSyncRequestIn(in *SyncRequest, out *metacontroller.SyncRequest, scope conversion.Scope) error {
	for _, raw := range []struct {
		path string
		ext  *runtime.RawExtension
	}{{"spec.parent", in.Spec.Parent}, {"spec.children", in.Spec.Children}} {
		if raw.ext == nil || len(raw.ext.Raw) == 0 {
			continue
		}
		var v interface{}
		if err := utiljson.Unmarshal(raw.ext.Raw, &v); err != nil {
			return fmt.Errorf("%s can't be decoded: %w", raw.path, err)
		}
	}
	return Convert_v1alpha1_SyncRequest_To_metacontroller_SyncRequest(in, out, scope)
}
