package framework

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// TestFixtureManifestsAreTheTemplatesTheyReplaced: each kind of fixture,
// now built from the apply configurations, parses to the same object as the
// YAML template it replaced rendered (the wants below are that rendering):
// the e2e tests apply what they applied before.
func TestFixtureManifestsAreTheTemplatesTheyReplaced(t *testing.T) {
	const url = "http://hook:1"
	for _, tc := range []struct {
		name, got, want string
	}{{
		name: "HelloController",
		got:  HelloController{Name: "h", HookURL: url}.Manifest(),
		want: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: h}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.com/v1, resource: hellos, labelSelector: {matchLabels: {test: h}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  - {apiVersion: v1, resource: services, updateStrategy: {method: InPlace}}
  hooks: {sync: {webhook: {url: http://hook:1/sync, timeout: 3s}}}
`,
	}, {
		name: "HelloController with every option",
		got:  HelloController{Name: "h", HookURL: url, Method: "Recreate", SelectAll: true, Timeout: "10s", ParentSelector: true}.Manifest(),
		want: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: h}
spec:
  generateSelector: false
  parentResource: {apiVersion: example.com/v1, resource: hellos}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: Recreate}}
  - {apiVersion: v1, resource: services, updateStrategy: {method: InPlace}}
  hooks: {sync: {webhook: {url: http://hook:1/sync, timeout: 10s}}}
`,
	}, {
		name: "ControllerFixture rolling with ReadyChecks",
		got: ControllerFixture{Name: "c", HookURL: url, SelectBy: "fleet", Method: "RollingInPlace", ReadyChecks: true, Timeout: "3s",
			Child: schema.GroupVersionResource{Group: "widgets.example.com", Version: "v1", Resource: "widgets"}}.Manifest(),
		want: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: c}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.com/v1, resource: hellos, labelSelector: {matchLabels: {fleet: c}}}
  childResources:
  - apiVersion: widgets.example.com/v1
    resource: widgets
    updateStrategy: {method: RollingInPlace, statusChecks: {conditions: [{type: Ready, status: "True"}]}}
  hooks: {sync: {webhook: {url: http://hook:1/sync, timeout: 3s}}}
`,
	}, {
		name: "DecoratorFixture",
		got:  DecoratorFixture{Name: "d", HookURL: url}.Manifest(),
		want: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: d}
spec:
  resources:
  - {apiVersion: example.com/v1, resource: hellos, labelSelector: {matchLabels: {test: d}}}
  - apiVersion: v1
    resource: configmaps
    labelSelector: {matchLabels: {test: d}}
    annotationSelector: {matchExpressions: [{key: attach, operator: Exists}]}
  attachments:
  - {apiVersion: v1, resource: secrets, updateStrategy: {method: InPlace}}
  hooks:
    sync: {version: v2, webhook: {url: http://hook:1/decorate, timeout: 3s}}
    finalize: {version: v2, webhook: {url: http://hook:1/decorate-finalize, timeout: 3s}}
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want map[string]interface{}
			if err := yaml.Unmarshal([]byte(tc.got), &got); err != nil {
				t.Fatalf("%v:\n%s", err, tc.got)
			}
			if err := yaml.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("manifest\n%s\nis not the template's\n%s", tc.got, tc.want)
			}
		})
	}
}

// TestSpecEditsTheFixtureLast: a fixture's Spec hook sees the spec the
// fixture built (the sync hook is there to add to) and what it sets is
// applied, in fields the API types decode strictly.
func TestSpecEditsTheFixtureLast(t *testing.T) {
	hello := HelloController{Name: "h", HookURL: "http://hook:1", Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.Sync.Webhook.WithEtag(acv1alpha1.WebhookEtagConfig().WithEnabled(true))
		s.Hooks.WithCustomize(HookAt("http://hook:1/customize", 2*time.Second).WithVersion(v1alpha1.HookVersionV2))
		s.WithServiceAccount(acv1alpha1.ServiceAccountReference().WithNamespace("ns").WithName("writer")).WithWorkers(2)
		s.ChildResources = s.ChildResources[:1]
	}}
	cc := &v1alpha1.CompositeController{}
	if err := yaml.UnmarshalStrict([]byte(hello.Manifest()), cc); err != nil {
		t.Fatalf("%v:\n%s", err, hello.Manifest())
	}
	sync, customize := cc.Spec.Hooks.Sync.Webhook, cc.Spec.Hooks.Customize
	switch {
	case sync.Etag == nil || sync.Etag.Enabled == nil || !*sync.Etag.Enabled || *sync.URL != "http://hook:1/sync":
		t.Errorf("sync hook %+v: want the fixture's, with etag enabled", sync)
	case customize == nil || *customize.Webhook.URL != "http://hook:1/customize" || customize.Webhook.Timeout.Duration != 2*time.Second ||
		customize.Version == nil || *customize.Version != v1alpha1.HookVersionV2:
		t.Errorf("customize hook %+v: want v2 at /customize within 2s", customize)
	case cc.Spec.ServiceAccount == nil || cc.Spec.ServiceAccount.Namespace != "ns" || cc.Spec.ServiceAccount.Name != "writer":
		t.Errorf("serviceAccount %+v: want ns/writer", cc.Spec.ServiceAccount)
	case cc.Spec.Workers == nil || *cc.Spec.Workers != 2 || len(cc.Spec.ChildResources) != 1:
		t.Errorf("workers %v and %d child resources: want 2 and 1", cc.Spec.Workers, len(cc.Spec.ChildResources))
	}

	decorator := DecoratorFixture{Name: "d", HookURL: "http://hook:1", NoFinalize: true, Spec: func(s *acv1alpha1.DecoratorControllerSpecApplyConfiguration) {
		s.WithServiceAccount(acv1alpha1.ServiceAccountReference().WithNamespace("ns").WithName("decorator"))
	}}
	dc := &v1alpha1.DecoratorController{}
	if err := yaml.UnmarshalStrict([]byte(decorator.Manifest()), dc); err != nil {
		t.Fatalf("%v:\n%s", err, decorator.Manifest())
	}
	if dc.Spec.ServiceAccount == nil || dc.Spec.ServiceAccount.Name != "decorator" || dc.Spec.Hooks.Finalize != nil || len(dc.Spec.Resources) != 2 {
		t.Errorf("decorator spec %+v: want its two resources, no finalize hook, and serviceAccount ns/decorator", dc.Spec)
	}
}

// TestManifestKeepsTheTextOtherTestsEdit: tests outside the fixtures still
// insert labels after the name and append fields to the spec as text; the
// YAML keeps both working.
func TestManifestKeepsTheTextOtherTestsEdit(t *testing.T) {
	text := DecoratorFixture{Name: "d", HookURL: "http://hook:1"}.Manifest()
	if !strings.Contains(text, "  name: d\n") {
		t.Fatalf("no line for a label after the name in:\n%s", text)
	}
	text = strings.Replace(text, "  name: d\n", "  name: d\n  labels: {group: g}\n", 1) + "  serviceAccount: {namespace: ns, name: decorator}\n"
	dc := &v1alpha1.DecoratorController{}
	if err := yaml.UnmarshalStrict([]byte(text), dc); err != nil {
		t.Fatalf("%v:\n%s", err, text)
	}
	if dc.Labels["group"] != "g" || dc.Spec.ServiceAccount == nil || dc.Spec.ServiceAccount.Name != "decorator" || dc.Spec.Hooks.Sync == nil {
		t.Errorf("edited manifest decoded to labels %v, spec %+v:\n%s", dc.Labels, dc.Spec, text)
	}
}
