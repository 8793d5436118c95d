package install

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	apifuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/dump"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	mcfuzzer "github.com/composite-apiserver/composite-apiserver/apis/metacontroller/fuzzer"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// The roundtrip package runs *roundtrip.FuzzIters iterations per kind: 20 by default and
// 5 under -race, settable only through a pflag that go test never parses. The
// tests raise it to -roundtrip-iters, 200 unless told.
var roundTripIters = flag.Int("roundtrip-iters", 200, "fuzzing iterations per kind in the round-trip tests")

func setFuzzIters(t *testing.T) {
	old := *roundtrip.FuzzIters
	*roundtrip.FuzzIters = *roundTripIters
	t.Cleanup(func() { *roundtrip.FuzzIters = old })
	t.Logf("%d fuzzing iterations per kind", *roundtrip.FuzzIters)
}

// TestRoundTripTypes fuzzes every internal kind of the group and round-trips
// it through JSON (no protobuf) of every served version:
// internal -> v1alpha1 -> JSON -> v1alpha1 (defaulted) -> internal.
func TestRoundTripTypes(t *testing.T) {
	setFuzzIters(t)
	roundtrip.RoundTripTestForAPIGroup(t, Install, mcfuzzer.Funcs)
}

// TestRoundTripExternalTypes fuzzes every external kind of the scheme (the
// group's and the meta kinds registered alongside them) and round-trips it
// through JSON, without protobuf: external -> JSON -> external.
func TestRoundTripExternalTypes(t *testing.T) {
	setFuzzIters(t)
	scheme := runtime.NewScheme()
	Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	f := apifuzzer.FuzzerFor(
		apifuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, mcfuzzer.Funcs),
		rand.NewSource(rand.Int63()),
		codecs,
	)
	roundtrip.RoundTripExternalTypesWithoutProtobuf(t, scheme, codecs, f, nil)
}

const minimalManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: hello-controller
spec:
  parentResource:
    apiVersion: example.com/v1
    resource: helloworlds
  childResources:
  - apiVersion: v1
    resource: pods
  hooks:
    sync:
      webhook:
        url: http://hello-controller.hello/sync
`

// fullManifest sets every field of the spec somewhere, and every defaulted
// field to a value, so that it re-encodes exactly as written. Fields that
// exclude each other (url/service, authorization/basicAuth, the caBundle
// sources) are set on different hooks or endpoints.
const fullManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: catsets
    revisionHistory:
      fieldPaths:
      - spec.template
      - spec.volumeClaimTemplates
    labelSelector:
      matchLabels:
        team: cats
      matchExpressions:
      - key: tier
        operator: In
        values:
        - frontend
        - backend
    ignoreStatusChanges: true
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - type: Ready
          status: "True"
          reason: PodReady
  - apiVersion: v1
    resource: persistentvolumeclaims
    updateStrategy:
      method: OnDelete
  hooks:
    customize:
      version: v2
      webhook:
        service:
          name: catset-controller
          namespace: metacontroller
          port: 8443
          protocol: https
        path: /customize
        timeout: 10s
        responseUnMarshallMode: strict
        caBundle:
          secretRef:
            name: catset-ca
            namespace: metacontroller
            key: ca.crt
        clientTLS:
          secretRef:
            name: catset-client
            namespace: metacontroller
          certKey: client.crt
          privateKeyKey: client.key
        authorization:
          type: Bearer
          secretRef:
            name: catset-token
            namespace: metacontroller
            key: token
    sync:
      version: v1
      webhook:
        url: https://catset.example.com/sync
        timeout: 20s
        etag:
          enabled: true
          cacheTimeoutSeconds: 60
          cacheCleanupSeconds: 600
        responseUnMarshallMode: loose
        caBundle:
          inline: |
            -----BEGIN CERTIFICATE-----
            MIIBszCCAVmgAwIBAgIUJ0examplePEM
            -----END CERTIFICATE-----
        basicAuth:
          secretRef:
            name: catset-basic
            namespace: metacontroller
          usernameKey: user
          passwordKey: pass
    finalize:
      version: v1
      webhook:
        url: https://catset.example.com/finalize
        responseUnMarshallMode: strict
        caBundle:
          configMapRef:
            name: catset-ca-bundle
            namespace: metacontroller
            key: bundle.pem
    preUpdateChild:
      version: v1
      webhook:
        url: https://catset.example.com/pre-update-child
        responseUnMarshallMode: loose
    postUpdateChild:
      version: v2
      webhook:
        url: https://catset.example.com/post-update-child
        responseUnMarshallMode: strict
    patches:
    - name: sidecar
      enabledIf: has(builtin.parent.spec.sidecar)
      webhook:
        url: https://catset.example.com/patch
        responseUnMarshallMode: strict
    - name: labels
      definitions:
      - selector:
          apiVersion: v1
          kind: Pod
          name: catset-0
        jsonPatches:
        - op: add
          path: /metadata/labels/team
          value: cats
        - op: replace
          path: /spec/priority
          valueFrom:
            variable: builtin.parent.spec.priority
        - op: add
          path: /metadata/annotations/owner
          valueFrom:
            template: '"{{ .builtin.parent.metadata.name }}"'
        - op: remove
          path: /spec/hostname
  endpointConfigs:
  - host: catset.example.com
    caBundle:
      configMapRef:
        name: catset-ca-bundle
        namespace: metacontroller
        key: ca.crt
    clientTLS:
      secretRef:
        name: catset-client
        namespace: metacontroller
      certKey: tls.crt
      privateKeyKey: tls.key
    authorization:
      type: Token
      secretRef:
        name: catset-token
        namespace: metacontroller
        key: token
  - host: other.example.com:8443
    basicAuth:
      secretRef:
        name: other-basic
        namespace: metacontroller
      usernameKey: username
      passwordKey: password
  ownChildWrites: Ignore
  ownStatusWrites: Ignore
  resyncPeriodSeconds: 30
  workers: 3
  generateSelector: true
  serviceAccount:
    namespace: metacontroller
    name: catset-controller
  rollout:
    steps:
    - selector:
        matchLabels:
          canary: "true"
      pauseSeconds: 30
    - maxParents: 10
    - percent: 50
    health:
      condition: parent.status.ready == true
      deadlineSeconds: 120
    errorBudget:
      maxSyncFailures: 3
    onFailure: Rollback
    paused: true
  revisionHistoryLimit: 5
`

// strictCodecs returns codecs of a scheme built with Install whose decoders
// reject unknown and duplicated fields.
func strictCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	Install(scheme)
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}

// decodeInternal decodes a manifest the way the API server does: to the
// internal version, applying the defaults of the manifest's version.
func decodeInternal(t *testing.T, codecs serializer.CodecFactory, manifest string) *metacontroller.CompositeController {
	t.Helper()
	obj, err := runtime.Decode(codecs.UniversalDecoder(), []byte(manifest))
	if err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	cc, ok := obj.(*metacontroller.CompositeController)
	if !ok {
		t.Fatalf("decoded %T, want *metacontroller.CompositeController", obj)
	}
	return cc
}

func TestDefaultsOnDecode(t *testing.T) {
	codecs := strictCodecs()

	t.Run("minimal manifest", func(t *testing.T) {
		cc := decodeInternal(t, codecs, minimalManifest)
		if cc.Spec.Hooks == nil || cc.Spec.Hooks.Sync == nil || cc.Spec.Hooks.Sync.Webhook == nil {
			t.Fatalf("sync webhook missing: %s", dump.Pretty(cc.Spec))
		}
		sync := cc.Spec.Hooks.Sync
		if sync.Version == nil || *sync.Version != metacontroller.HookVersionV1 {
			t.Errorf("sync hook version = %v, want %q", dump.Pretty(sync.Version), metacontroller.HookVersionV1)
		}
		// The decoding mode follows the version when the hook is called;
		// stored, it would outlive a change of version.
		if m := sync.Webhook.ResponseUnMarshallMode; m != nil {
			t.Errorf("sync responseUnMarshallMode = %v, want it left unset", dump.Pretty(m))
		}
		if len(cc.Spec.ChildResources) != 1 {
			t.Fatalf("got %d child resources, want 1", len(cc.Spec.ChildResources))
		}
		if s := cc.Spec.ChildResources[0].UpdateStrategy; s == nil || s.Method != metacontroller.ChildUpdateOnDelete {
			t.Errorf("child updateStrategy = %v, want method %q", dump.Pretty(s), metacontroller.ChildUpdateOnDelete)
		}
		if cc.Spec.Hooks.Customize != nil || cc.Spec.Hooks.Finalize != nil {
			t.Errorf("unset hooks were created: %s", dump.Pretty(cc.Spec.Hooks))
		}

		// The v1alpha1 object written back carries the defaults.
		data, err := runtime.Encode(codecs.LegacyCodec(v1alpha1.SchemeGroupVersion), cc)
		if err != nil {
			t.Fatalf("encoding: %v", err)
		}
		for _, want := range []string{`"version":"v1"`, `"method":"OnDelete"`} {
			if !strings.Contains(string(data), want) {
				t.Errorf("encoded object lacks %s: %s", want, data)
			}
		}
		if strings.Contains(string(data), "responseUnMarshallMode") {
			t.Errorf("encoded object stores a decoding mode nobody set: %s", data)
		}
	})

	for _, tc := range []struct {
		name     string
		version  metacontroller.HookVersion
		mode     string                                // responseUnMarshallMode set in the manifest, if any
		wantMode metacontroller.ResponseUnmarshallMode // "": left unset
	}{
		{"v1 hook", metacontroller.HookVersionV1, "", ""},
		{"v2 hook", metacontroller.HookVersionV2, "", ""},
		{"v2 hook, loose kept", metacontroller.HookVersionV2, "loose", metacontroller.ResponseUnmarshallModeLoose},
		{"v1 hook, strict kept", metacontroller.HookVersionV1, "strict", metacontroller.ResponseUnmarshallModeStrict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := "    sync:\n      version: " + string(tc.version) + "\n      webhook:\n"
			if tc.mode != "" {
				hook += "        responseUnMarshallMode: " + tc.mode + "\n"
			}
			manifest := strings.Replace(minimalManifest, "    sync:\n      webhook:\n", hook, 1)
			if !strings.Contains(manifest, hook) {
				t.Fatalf("manifest not patched:\n%s", manifest)
			}
			cc := decodeInternal(t, codecs, manifest)
			sync := cc.Spec.Hooks.Sync
			if sync.Version == nil || *sync.Version != tc.version {
				t.Errorf("sync hook version = %v, want %q", dump.Pretty(sync.Version), tc.version)
			}
			if sync.Webhook == nil || sync.Webhook.URL == nil {
				t.Fatalf("sync webhook lost: %s", dump.Pretty(sync))
			}
			switch m := sync.Webhook.ResponseUnMarshallMode; {
			case tc.wantMode == "" && m != nil:
				t.Errorf("sync responseUnMarshallMode = %v, want it left unset", dump.Pretty(m))
			case tc.wantMode != "" && (m == nil || *m != tc.wantMode):
				t.Errorf("sync responseUnMarshallMode = %v, want %q", dump.Pretty(m), tc.wantMode)
			}
		})
	}
}

func TestFullManifestDecodesStrictlyAndRoundTrips(t *testing.T) {
	codecs := strictCodecs()

	// The manifest must exercise every field of every type of the spec,
	// checked on a plain strict decode that applies no defaults.
	scheme := runtime.NewScheme()
	Install(scheme)
	plain := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme,
		jsonserializer.SerializerOptions{Yaml: true, Strict: true})
	obj, _, err := plain.Decode([]byte(fullManifest), nil, nil)
	if err != nil {
		t.Fatalf("strict decoding of the manifest: %v", err)
	}
	versioned, ok := obj.(*v1alpha1.CompositeController)
	if !ok {
		t.Fatalf("decoded %T, want *v1alpha1.CompositeController", obj)
	}
	if unset := unsetFields(versioned.Spec); len(unset) != 0 {
		t.Errorf("the manifest sets no value for these spec fields:\n  %s", strings.Join(unset, "\n  "))
	}

	// Decoding as the server does (strict, defaulted, to internal) and
	// encoding back to v1alpha1 must give the manifest back, every field.
	cc := decodeInternal(t, codecs, fullManifest)
	data, err := runtime.Encode(codecs.LegacyCodec(v1alpha1.SchemeGroupVersion), cc)
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	manifestJSON, err := utilyaml.ToJSON([]byte(fullManifest))
	if err != nil {
		t.Fatalf("converting the manifest to JSON: %v", err)
	}
	in, out := leafPaths(t, manifestJSON), leafPaths(t, data)
	for _, p := range sortedKeys(in) {
		got, ok := out[p]
		switch {
		case !ok:
			t.Errorf("%s: lost on re-encoding", p)
		case !reflect.DeepEqual(got, in[p]):
			t.Errorf("%s: re-encoded as %v, manifest has %v", p, got, in[p])
		}
	}
	for _, p := range sortedKeys(out) {
		if _, ok := in[p]; ok {
			continue
		}
		// Empty values the encoder always writes (metadata.creationTimestamp,
		// status) are not fields of the manifest.
		if v := out[p]; v != nil && !reflect.DeepEqual(v, map[string]interface{}{}) {
			t.Errorf("%s: re-encoding added %v", p, v)
		}
	}
	if t.Failed() {
		t.Logf("re-encoded: %s", data)
	}
	if len(in) < 70 {
		t.Errorf("only %d leaf paths compared; the manifest is not the full one", len(in))
	}
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	codecs := strictCodecs()
	for _, tc := range []struct{ name, from, to string }{
		{"misspelled field", "responseUnMarshallMode: strict", "responseUnmarshalMode: strict"},
		{"unknown field", "generateSelector: true", "generateSelector: true\n  bogus: 1"},
		{"duplicated field", "resyncPeriodSeconds: 30", "resyncPeriodSeconds: 30\n  resyncPeriodSeconds: 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest := strings.Replace(fullManifest, tc.from, tc.to, 1)
			if manifest == fullManifest {
				t.Fatalf("manifest not patched")
			}
			_, err := runtime.Decode(codecs.UniversalDecoder(), []byte(manifest))
			if err == nil || !runtime.IsStrictDecodingError(err) {
				t.Errorf("got error %v, want a strict decoding error", err)
			}
		})
	}
}

// unsetFields lists, as Type.field, the fields of the struct types reachable
// from v's type that are zero in every instance found in v.
// earliestShapeFields are the deprecated fields of Metacontroller's earliest
// shape: they are converted into today's fields and never written back, so
// no manifest round-trips them (v1alpha1's legacy_shape_test.go covers
// them).
var earliestShapeFields = map[string]bool{
	"v1alpha1.CompositeControllerSpec.ClientConfig":           true,
	"v1alpha1.ClientConfig.Service":                           true,
	"v1alpha1.CompositeControllerSpec.UpdateStrategy":         true,
	"v1alpha1.CompositeControllerChildResourceRule.Resources": true,
	"v1alpha1.Hook.Path":                                      true,
}

func unsetFields(v interface{}) []string {
	all := map[string]bool{}
	collectFields(reflect.TypeOf(v), all, map[reflect.Type]bool{})
	markSetFields(reflect.ValueOf(v), all)
	var unset []string
	for f, set := range all {
		if !set && !earliestShapeFields[f] {
			unset = append(unset, f)
		}
	}
	sort.Strings(unset)
	return unset
}

func collectFields(t reflect.Type, fields map[string]bool, seen map[reflect.Type]bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		collectFields(t.Elem(), fields, seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				fields[t.String()+"."+f.Name] = false
				collectFields(f.Type, fields, seen)
			}
		}
	}
}

func markSetFields(v reflect.Value, fields map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			markSetFields(v.Elem(), fields)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			markSetFields(v.Index(i), fields)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			markSetFields(it.Value(), fields)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				if !v.Field(i).IsZero() {
					fields[t.String()+"."+f.Name] = true
				}
				markSetFields(v.Field(i), fields)
			}
		}
	}
}

// leafPaths flattens a JSON document to its leaves keyed by path, such as
// spec.childResources[0].updateStrategy.method. Empty objects and arrays are
// leaves too.
func leafPaths(t *testing.T, data []byte) map[string]interface{} {
	t.Helper()
	var doc interface{}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("unmarshalling %s: %v", data, err)
	}
	paths := map[string]interface{}{}
	var walk func(prefix string, v interface{})
	walk = func(prefix string, v interface{}) {
		switch v := v.(type) {
		case map[string]interface{}:
			if len(v) == 0 {
				paths[prefix] = v
			}
			for k, e := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case []interface{}:
			if len(v) == 0 {
				paths[prefix] = v
			}
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e)
			}
		default:
			paths[prefix] = v
		}
	}
	walk("", doc)
	return paths
}

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
