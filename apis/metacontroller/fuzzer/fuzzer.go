// Package fuzzer holds the fuzzer functions of the metacontroller.k8s.io API
// group, used by round-trip tests.
package fuzzer

import (
	"encoding/json"

	"sigs.k8s.io/randfill"

	"k8s.io/apimachinery/pkg/runtime"

	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// Funcs returns the fuzzer functions for the metacontroller.k8s.io API group.
//
// An internal object is round-tripped through v1alpha1, whose decoding applies
// the v1alpha1 defaults. Every field those defaults fill must therefore be set
// already in a fuzzed object, or it would come back changed. Each function
// below fuzzes its type and then fills such fields the way defaulting would.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		// A RawExtension carries JSON (a hook's objects and status); random
		// bytes would not survive encoding as JSON.
		func(r *runtime.RawExtension, c randfill.Continue) {
			obj := map[string]interface{}{"kind": c.String(0), "data": map[string]interface{}{c.String(0): c.String(0)}, "n": c.Int63()}
			raw, err := json.Marshal(obj)
			if err != nil {
				panic(err)
			}
			r.Raw = raw
		},
		// A JSON value (an inline patch's value) carries JSON of any type;
		// null is not one, as it decodes as no value at all.
		func(j *metacontroller.JSON, c randfill.Continue) {
			j.Raw = fuzzJSON(c)
		},
		func(j *v1alpha1.JSON, c randfill.Continue) {
			j.Raw = fuzzJSON(c)
		},
		func(p *metacontroller.PatchHook, c randfill.Continue) {
			c.FillNoCustom(p)

			if p.Webhook != nil && p.Webhook.ResponseUnMarshallMode == nil {
				mode := metacontroller.ResponseUnmarshallModeStrict
				p.Webhook.ResponseUnMarshallMode = &mode
			}
		},
		// The record of a conversion from Metacontroller's earliest shape
		// belongs to one request: it is never encoded.
		func(cc *metacontroller.CompositeController, c randfill.Continue) {
			c.FillNoCustom(cc)
			cc.LegacyShape = nil
		},
		func(*metacontroller.LegacyShape, randfill.Continue) {},
		func(r *metacontroller.CompositeControllerChildResourceRule, c randfill.Continue) {
			c.FillNoCustom(r) // fuzz self without calling this function again

			if r.UpdateStrategy == nil {
				r.UpdateStrategy = &metacontroller.CompositeControllerChildUpdateStrategy{}
			}
			if r.UpdateStrategy.Method == "" {
				r.UpdateStrategy.Method = metacontroller.ChildUpdateOnDelete
			}
		},
		func(r *metacontroller.DecoratorControllerAttachmentRule, c randfill.Continue) {
			c.FillNoCustom(r)

			if r.UpdateStrategy == nil {
				r.UpdateStrategy = &metacontroller.DecoratorControllerAttachmentUpdateStrategy{}
			}
			if r.UpdateStrategy.Method == "" {
				r.UpdateStrategy.Method = metacontroller.ChildUpdateOnDelete
			}
		},
		func(h *metacontroller.Hook, c randfill.Continue) {
			c.FillNoCustom(h)

			if h.Version == nil {
				v := metacontroller.HookVersionV1
				h.Version = &v
			}
			if h.Webhook != nil && h.Webhook.ResponseUnMarshallMode == nil {
				mode := metacontroller.ResponseUnmarshallModeLoose
				if *h.Version == metacontroller.HookVersionV2 {
					mode = metacontroller.ResponseUnmarshallModeStrict
				}
				h.Webhook.ResponseUnMarshallMode = &mode
			}
		},
		func(s *metacontroller.ServiceReference, c randfill.Continue) {
			c.FillNoCustom(s)

			if s.Port == nil {
				port := int32(80)
				s.Port = &port
			}
			if s.Protocol == nil {
				protocol := "http"
				s.Protocol = &protocol
			}
		},
		func(b *metacontroller.CABundleConfig, c randfill.Continue) {
			c.FillNoCustom(b)

			for _, ref := range []*metacontroller.KeyReference{b.SecretRef, b.ConfigMapRef} {
				if ref != nil && ref.Key == "" {
					ref.Key = "ca.crt"
				}
			}
		},
		func(t *metacontroller.ClientTLSConfig, c randfill.Continue) {
			c.FillNoCustom(t)

			if t.CertKey == "" {
				t.CertKey = "tls.crt"
			}
			if t.PrivateKeyKey == "" {
				t.PrivateKeyKey = "tls.key"
			}
		},
		func(a *metacontroller.AuthorizationConfig, c randfill.Continue) {
			c.FillNoCustom(a)

			if a.Type == "" {
				a.Type = "Bearer"
			}
		},
		func(b *metacontroller.BasicAuthConfig, c randfill.Continue) {
			c.FillNoCustom(b)

			if b.UsernameKey == "" {
				b.UsernameKey = "username"
			}
			if b.PasswordKey == "" {
				b.PasswordKey = "password"
			}
		},
	}
}

// fuzzJSON is a JSON value of a random type.
func fuzzJSON(c randfill.Continue) []byte {
	var v interface{}
	switch c.Intn(5) {
	case 0:
		v = c.String(0)
	case 1:
		v = c.Int63()
	case 2:
		v = c.Bool()
	case 3:
		v = []interface{}{c.String(0), c.Int63()}
	default:
		v = map[string]interface{}{c.String(0): c.String(0)}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
