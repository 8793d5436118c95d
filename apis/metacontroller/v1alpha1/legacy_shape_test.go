package v1alpha1_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
	"github.com/composite-apiserver/composite-apiserver/internal/apicheck"
)

// catset is the CompositeController of the hook contract this project was
// founded on, in Metacontroller's earliest shape, verbatim.
const catset = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
    - apiVersion: v1
      resources: ["pods", "persistentvolumeclaims"]
  clientConfig:
    service: {name: catset-controller, namespace: metacontroller}
  hooks:
    sync: {path: /sync}
`

// current is catset in today's shape, as the server stores and serves it
// (defaults included).
const current = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
  - {apiVersion: v1, resource: pods, updateStrategy: {method: OnDelete, statusChecks: {}}}
  - {apiVersion: v1, resource: persistentvolumeclaims, updateStrategy: {method: OnDelete, statusChecks: {}}}
  hooks:
    sync:
      version: v1
      webhook:
        service: {name: catset-controller, namespace: metacontroller, port: 80, protocol: http}
        path: /sync
status: {}
`

type codec struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

func newCodec() codec {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return codec{scheme: scheme, codecs: serializer.NewCodecFactory(scheme)}
}

// decode reads a manifest as the server reads a request body: v1alpha1,
// defaulted, converted to the internal type.
func (c codec) decode(t *testing.T, manifest string) *metacontroller.CompositeController {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := c.codecs.UniversalDecoder(metacontroller.SchemeGroupVersion).Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("can't decode: %v", err)
	}
	return obj.(*metacontroller.CompositeController)
}

// encode writes an internal object as the server stores and serves it.
func (c codec) encode(t *testing.T, cc *metacontroller.CompositeController) map[string]interface{} {
	t.Helper()
	data, err := runtime.Encode(c.codecs.LegacyCodec(v1alpha1.SchemeGroupVersion), cc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]interface{}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	delete(m["metadata"].(map[string]interface{}), "creationTimestamp")
	return m
}

func asMap(t *testing.T, manifest string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEarliestShapeIsStoredInTodaysShape: the founding document's manifest
// converts into today's fields with a warning per conversion, is written
// back in today's shape only, and reads back as the same object with
// nothing left to warn of.
func TestEarliestShapeIsStoredInTodaysShape(t *testing.T) {
	c := newCodec()
	cc := c.decode(t, catset)

	if cc.LegacyShape == nil {
		t.Fatal("no record of the conversion")
	}
	if errs := allErrors(cc.LegacyShape); len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantWarnings := []string{
		`spec.childResources[0].resources: deprecated (Metacontroller's earliest CompositeController shape): converted into one spec.childResources entry per resource: {apiVersion: v1, resource: pods}, {apiVersion: v1, resource: persistentvolumeclaims}`,
		`spec.hooks.sync.path: deprecated (Metacontroller's earliest CompositeController shape): converted into spec.hooks.sync.webhook.path "/sync" on spec.hooks.sync.webhook.service metacontroller/catset-controller`,
		`spec.clientConfig: deprecated (Metacontroller's earliest CompositeController shape): converted into the webhook.service of spec.hooks.sync`,
	}
	if !reflect.DeepEqual(wantWarnings, cc.LegacyShape.Conversions) {
		t.Errorf("warnings (-want +got):\n%s", diff.Diff(wantWarnings, cc.LegacyShape.Conversions))
	}

	stored := c.encode(t, cc)
	if !reflect.DeepEqual(asMap(t, current), stored) {
		t.Errorf("stored (-want +got):\n%s", diff.Diff(asMap(t, current), stored))
	}

	again := c.decode(t, current)
	if again.LegacyShape != nil {
		t.Errorf("today's shape recorded as a conversion: %+v", again.LegacyShape)
	}
	cc.LegacyShape = nil
	if !reflect.DeepEqual(cc, again) {
		t.Errorf("read back (-converted +stored):\n%s", diff.Diff(cc, again))
	}
}

// TestEarliestShapeMergedWithTodaysAgrees: an apply of the earliest shape
// over the stored object (kubectl apply's merge patch keeps the stored
// webhook beside the manifest's path; server-side apply keeps the stored
// entries beside the manifest's resources) converts into the same object.
func TestEarliestShapeMergedWithTodaysAgrees(t *testing.T) {
	c := newCodec()
	want := c.decode(t, current)
	merged := c.decode(t, `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: catset-controller}
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
  - {apiVersion: v1, resource: pods, updateStrategy: {method: OnDelete}}
  - {apiVersion: v1, resource: persistentvolumeclaims, updateStrategy: {method: OnDelete}}
  - {apiVersion: v1, resources: [pods, persistentvolumeclaims]}
  clientConfig:
    service: {name: catset-controller, namespace: metacontroller}
  updateStrategy: Apply
  hooks:
    sync:
      path: /sync
      version: v1
      webhook:
        service: {name: catset-controller, namespace: metacontroller, port: 80, protocol: http}
        path: /sync
`)
	if merged.LegacyShape == nil || len(allErrors(merged.LegacyShape)) != 0 {
		t.Fatalf("record: %+v", merged.LegacyShape)
	}
	if got := merged.LegacyShape.Conversions; len(got) != 4 || !strings.HasPrefix(got[3], "spec.updateStrategy: deprecated") {
		t.Errorf("warnings: %q", got)
	}
	if !reflect.DeepEqual(want.Spec, merged.Spec) {
		t.Errorf("spec (-stored +merged):\n%s", diff.Diff(want.Spec, merged.Spec))
	}
}

// TestEarliestShapeContradictionsAreFieldErrors: deprecated fields that
// contradict each other or today's fields are refused with a field error
// naming them, never settled by a silent choice.
func TestEarliestShapeContradictionsAreFieldErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec string
		want field.ErrorList
	}{{
		name: "resource and resources in one entry",
		spec: `
  childResources: [{apiVersion: v1, resource: configmaps, resources: [pods]}]
  hooks: {sync: {webhook: {url: "http://hook/sync"}}}`,
		want: field.ErrorList{field.Forbidden(field.NewPath("spec", "childResources").Index(0).Child("resources"), "may not be set with spec.childResources[0].resource: give one resource per entry")},
	}, {
		name: "a hook path and a webhook url",
		spec: `
  clientConfig: {service: {name: hook, namespace: ns}}
  hooks: {sync: {path: /sync, webhook: {url: "http://hook/sync"}}}`,
		want: field.ErrorList{field.Forbidden(field.NewPath("spec", "hooks", "sync", "path"), "may not be set with spec.hooks.sync.webhook.url: give the hook as a url or as a path on spec.clientConfig.service")},
	}, {
		name: "clientConfig and a hook's webhook of another service",
		spec: `
  clientConfig: {service: {name: hook, namespace: ns}}
  hooks: {sync: {path: /sync, webhook: {service: {name: other, namespace: ns}}}}`,
		want: field.ErrorList{field.Invalid(field.NewPath("spec", "hooks", "sync", "webhook", "service"), "ns/other", "differs from spec.clientConfig.service (ns/hook), which spec.hooks.sync.path says to use: set one of them")},
	}, {
		name: "a hook path and another webhook path",
		spec: `
  clientConfig: {service: {name: hook, namespace: ns}}
  hooks: {sync: {path: /sync, webhook: {service: {name: hook, namespace: ns}, path: /other}}}`,
		want: field.ErrorList{field.Invalid(field.NewPath("spec", "hooks", "sync", "path"), "/sync", `differs from spec.hooks.sync.webhook.path "/other": set one of them`)},
	}, {
		name: "clientConfig and a hook given as a webhook",
		spec: `
  clientConfig: {service: {name: hook, namespace: ns}}
  hooks: {sync: {webhook: {url: "http://hook/sync"}}}`,
		want: field.ErrorList{field.Forbidden(field.NewPath("spec", "clientConfig"), "is used only by hooks given by path (spec.hooks.<hook>.path), and none is; spec.hooks.sync.webhook set: give the Service there as webhook.service")},
	}, {
		name: "a hook path without clientConfig",
		spec: `
  hooks: {sync: {path: /sync}}`,
		want: field.ErrorList{field.Required(field.NewPath("spec", "clientConfig", "service"), "the Service of spec.hooks.sync.path")},
	}, {
		name: "an updateStrategy other than Apply",
		spec: `
  updateStrategy: Patch
  hooks: {sync: {webhook: {url: "http://hook/sync"}}}`,
		want: field.ErrorList{field.NotSupported(field.NewPath("spec", "updateStrategy"), "Patch", []string{"Apply"})},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newCodec().decode(t, `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: c}
spec:
  parentResource: {apiVersion: example.com/v1, resource: things}`+tc.spec)
			if cc.LegacyShape == nil {
				t.Fatal("no record of the conversion")
			}
			if !reflect.DeepEqual(tc.want.ToAggregate().Error(), allErrors(cc.LegacyShape).ToAggregate().Error()) {
				t.Errorf("errors (-want +got):\n%s", diff.Diff(tc.want.ToAggregate().Error(), allErrors(cc.LegacyShape).ToAggregate().Error()))
			}
		})
	}
}

// allErrors are the field errors of a conversion, hook conflicts included
// (validation drops those of a webhook kept from the stored object).
func allErrors(l *metacontroller.LegacyShape) field.ErrorList {
	errs := append(field.ErrorList(nil), l.Errors...)
	for _, c := range l.HookConflicts {
		errs = append(errs, c.Errors...)
	}
	return errs
}

// TestEditedEarliestShapeReplacesTheStoredWebhook: kubectl apply of an
// edited manifest in the earliest shape sends a merge patch with the new
// path and clientConfig, which keeps the stored webhook beside them. That
// webhook is not the client's: the path and clientConfig replace it, and
// the update is valid. The same object as a create, or with a webhook that
// is not the stored one, contradicts itself and is refused naming both
// fields.
func TestEditedEarliestShapeReplacesTheStoredWebhook(t *testing.T) {
	c := newCodec()
	stored := c.decode(t, current)
	stored.ResourceVersion = "1"
	merged := func(webhookExtra string) *metacontroller.CompositeController {
		cc := c.decode(t, `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: catset-controller, resourceVersion: "1"}
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
  - {apiVersion: v1, resources: [pods]}
  clientConfig:
    service: {name: catset-controller-v2, namespace: metacontroller}
  hooks:
    sync:
      path: /v2/sync
      version: v1
      webhook:
        service: {name: catset-controller, namespace: metacontroller, port: 80, protocol: http}
        path: /sync`+webhookExtra+`
`)
		return cc
	}
	legacyErrs := func(errs field.ErrorList) []string {
		var out []string
		for _, e := range errs {
			if strings.HasPrefix(e.Field, "spec.hooks.sync") || strings.HasPrefix(e.Field, "spec.clientConfig") {
				out = append(out, e.Error())
			}
		}
		return out
	}
	exprs := apicheck.Expressions{}

	update := merged("")
	if errs := validation.ValidateCompositeControllerUpdate(update, stored, exprs); len(errs) != 0 {
		t.Errorf("the update is refused: %v", errs)
	}
	want := metacontroller.Webhook{
		Service: &metacontroller.ServiceReference{Name: "catset-controller-v2", Namespace: "metacontroller", Port: ptr(int32(80)), Protocol: ptr("http")},
		Path:    ptr("/v2/sync"),
	}
	if got := update.Spec.Hooks.Sync.Webhook; !reflect.DeepEqual(*got, want) {
		t.Errorf("sync webhook after the update:\n%s", diff.Diff(want, *got))
	}
	if got := update.Spec.ChildResources; len(got) != 1 || got[0].Resource != "pods" {
		t.Errorf("childResources after the update: %+v", got)
	}

	wantErrs := []string{
		`spec.hooks.sync.webhook.service: Invalid value: "metacontroller/catset-controller": differs from spec.clientConfig.service (metacontroller/catset-controller-v2), which spec.hooks.sync.path says to use: set one of them`,
		`spec.hooks.sync.path: Invalid value: "/v2/sync": differs from spec.hooks.sync.webhook.path "/sync": set one of them`,
	}
	if got := legacyErrs(validation.ValidateCompositeController(merged(""), exprs)); !reflect.DeepEqual(got, wantErrs) {
		t.Errorf("as a create:\n%s", diff.Diff(wantErrs, got))
	}
	notStored := merged("\n        timeout: 5s")
	if got := legacyErrs(validation.ValidateCompositeControllerUpdate(notStored, stored, exprs)); !reflect.DeepEqual(got, wantErrs) {
		t.Errorf("with a webhook that is not the stored one:\n%s", diff.Diff(wantErrs, got))
	}
}

func ptr[T any](v T) *T { return &v }

// TestHookPathOutsideACompositeControllerIsRefused: hooks of every kind
// share the Hook type, but only a CompositeController has a clientConfig
// for a path to be on; any other conversion of a hook with a path fails
// rather than dropping it.
func TestHookPathOutsideACompositeControllerIsRefused(t *testing.T) {
	c := newCodec()
	err := c.scheme.Convert(&v1alpha1.Hook{Path: ptr("/sync")}, &metacontroller.Hook{}, nil)
	if err == nil || !strings.Contains(err.Error(), "accepted only in a CompositeController") {
		t.Errorf("converting a hook with a path: %v, want it refused", err)
	}
}

// BenchmarkDecodeStoredCompositeController decodes an object in today's
// shape as the server reads one from etcd: the conversion from the
// earliest shape must cost such reads nothing.
func BenchmarkDecodeStoredCompositeController(b *testing.B) {
	c := newCodec()
	data, err := yaml.YAMLToJSON([]byte(current))
	if err != nil {
		b.Fatal(err)
	}
	decoder := c.codecs.UniversalDecoder(metacontroller.SchemeGroupVersion)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decoder.Decode(data, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
