package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/apicheck"
)

// FuzzCompositeControllerBody decodes any bytes as a request body the way
// the server does (JSON or YAML into v1alpha1, defaults, conversion to the
// internal type) and validates the result: an error or field errors, never
// a panic. A panic in any of these is a 500 for the user.
func FuzzCompositeControllerBody(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"c"},"spec":{"parentResource":{"apiVersion":"example.com/v1","resource":"things"},"childResources":[{"apiVersion":"v1","resource":"configmaps","updateStrategy":{"method":"InPlace","statusChecks":{"conditions":[{"type":"Ready"}]}}}],"hooks":{"sync":{"webhook":{"url":"http://h/sync","timeout":"45s","etag":{"enabled":true}}},"customize":{"webhook":{"service":{"name":"h","namespace":"n","port":70000},"path":"x"}}},"endpointConfigs":[{"host":"[::1","caBundle":{"inline":"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----"}}],"resyncPeriodSeconds":-1,"workers":0}}`,
		`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","spec":{"parentResource":{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Nope"}]}},"hooks":{"sync":{"version":"v9","webhook":{"url":"ftp://x?y#z","authorization":{"type":"Basic"},"basicAuth":{}}}}}}`,
		`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","spec":{"hooks":{"sync":{"webhook":{"timeout":"-1h"}}},"parentResource":{"revisionHistory":{"fieldPaths":[""]}}}}`,
		"apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nspec: {childResources: [{}, {}]}\n",
		`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","spec":[]}`,
		`{}`, `null`, `[`, "\xff",
	} {
		f.Add([]byte(s))
	}
	scheme := runtime.NewScheme()
	Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	decoder := codecs.UniversalDecoder(metacontroller.SchemeGroupVersion)
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, _, err := decoder.Decode(body, nil, nil)
		if err != nil {
			return
		}
		cc, ok := obj.(*metacontroller.CompositeController)
		if !ok {
			return
		}
		_ = validation.ValidateCompositeController(cc, apicheck.Expressions{})
		_ = validation.Warnings(cc, apicheck.Expressions{})
		_ = validation.ValidateCompositeControllerUpdate(cc, cc.DeepCopy(), apicheck.Expressions{})
		// And back out, as a response would be.
		out := &v1alpha1.CompositeController{}
		if err := scheme.Convert(cc, out, nil); err != nil {
			t.Fatalf("a decoded object does not convert back: %v", err)
		}
	})
}
