package controllerregistry_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// exampleV1 is /openapi/v3/apis/example.com/v1 as kube-apiserver serves
// three CRDs: widgets, typed, with a list of no maxItems; hellos, the e2e
// tests' parent, whose spec and status hold anything; things, which hold
// anything.
const exampleV1 = `{"openapi": "3.0.0", "components": {"schemas": {
  "com.example.v1.Widget": {"type": "object",
    "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
      "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "items": {"type": "array", "items": {"type": "string"}}}},
      "status": {"type": "object", "properties": {"readyReplicas": {"type": "integer"}}}}},
  "com.example.v1.Hello": {"type": "object",
    "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Hello"}],
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
      "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
      "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
  "com.example.v1.Thing": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
    "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Thing"}]},
  "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
    "name": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
}}}`

// cluster is the target cluster's discovery and /openapi/v3: Kubernetes'
// own group versions as a kube-apiserver serves them (client-go's test
// copies), and example.com/v1 once its CRDs are served.
type cluster struct {
	discovery.DiscoveryInterface
	mu      sync.Mutex
	mapper  *meta.DefaultRESTMapper
	example bool
}

func newCluster() *cluster {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	return &cluster{mapper: mapper}
}

// serveExample serves the CRDs of example.com/v1.
func (c *cluster) serveExample() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.example = true
	c.mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	c.mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Hello"}, meta.RESTScopeNamespace)
	c.mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"}, meta.RESTScopeNamespace)
}

func (c *cluster) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mapper.KindFor(r)
}

func (c *cluster) OpenAPIV3() openapi.Client { return c }

func (c *cluster) Paths() (map[string]openapi.GroupVersion, error) {
	paths, err := openapitest.NewEmbeddedFileClient().Paths()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.example {
		paths["apis/example.com/v1"] = openapitest.FakeGroupVersion{GVSpec: []byte(exampleV1)}
	}
	return paths, nil
}

func (c *cluster) schemas() *controllerregistry.ParentSchemas {
	return &controllerregistry.ParentSchemas{Kinds: c, Schemas: &resolver.ClientDiscoveryResolver{Discovery: c}}
}

// setParent makes r the controller's parent resource (a decorator's
// first resource), and its health condition condition.
func setParent(obj runtime.Object, r metacontroller.ResourceRule, condition string) {
	switch o := obj.(type) {
	case *metacontroller.CompositeController:
		o.Spec.ParentResource.ResourceRule = r
	case *metacontroller.DecoratorController:
		o.Spec.Resources[0].ResourceRule = r
	}
	viewOf(obj).setCondition(condition)
}

func (v view) setCondition(condition string) {
	(*v.rollout).Health = &metacontroller.RolloutHealth{Condition: ptr.To(condition)}
}

// numbers is a list literal of n integers.
func numbers(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(s, ",") + "]"
}

var (
	widgets     = metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "widgets"}
	hellos      = metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	deployments = metacontroller.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"}
)

// TestHealthConditionCostIsCheckedAtAdmission: a new health condition is
// typed by the parent resource's schema, as the target cluster serves it,
// and its cost estimated as a CRD rule's (R7): one that exceeds the
// per-call limit, or does not compile over the schema, is refused with a
// field error on spec.rollout.health.condition; without a schema the
// parent is dynamic, which a warning says.
func TestHealthConditionCostIsCheckedAtAdmission(t *testing.T) {
	quadratic := fmt.Sprintf(`%s.all(x, %s.all(y, x != y))`, numbers(1000), numbers(1000))
	cases := []struct {
		name      string
		parent    metacontroller.ResourceRule
		condition string
		// refused is part of the field error; warned part of a warning.
		refused, warned string
	}{
		{name: "a cheap condition over a typed CRD", parent: widgets, condition: `parent.status.readyReplicas == parent.spec.replicas`},
		{name: "a cheap condition over Deployments", parent: deployments, condition: `parent.status.readyReplicas == parent.spec.replicas`},
		{name: "the e2e tests' condition over hellos, whose status holds anything", parent: hellos, condition: `has(parent.status.count) && parent.status.count == 3`},
		{name: "nested all() over two 1,000-element lists", parent: widgets, condition: quadratic,
			refused: "spec.rollout.health.condition: Forbidden: estimated cost"},
		{name: "nested all() over a list of no maxItems", parent: widgets, condition: `parent.spec.items.all(x, parent.spec.items.all(y, x == y))`,
			refused: "exceeds the per-call limit 1000000 by a factor of more than 100x"},
		{name: "nested all() over Deployments' containers", parent: deployments,
			condition: `parent.spec.template.spec.containers.all(c, parent.spec.template.spec.containers.all(d, c == d || c.name != d.name))`,
			refused:   "over apps/v1 deployments exceeds the per-call limit"},
		{name: "one loop over Deployments' conditions, a list the user can't bound", parent: deployments,
			condition: `parent.status.conditions.exists(c, c.type == "Available" && c.status == "True")`,
			warned:    "spec.rollout.health.condition: its estimated cost over apps/v1 deployments is"},
		{name: "a field the schema does not have", parent: widgets, condition: `parent.spec.replica == 3`,
			refused: "spec.rollout.health.condition: Invalid value: \"parent.spec.replica == 3\": over the schema of example.com/v1 widgets: does not compile"},
		{name: "nested all() over what hellos leave open", parent: hellos, condition: `parent.spec.items.all(x, parent.spec.items.all(y, x == y))`,
			warned: "spec.rollout.health.condition: its cost over example.com/v1 hellos has no bound"},
		{name: "a CRD that preserves unknown fields at its root", parent: metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}, condition: quadratic,
			warned: "not checked over example.com/v1 things, its schema preserves unknown fields: the parent is dynamic"},
		{name: "a resource the cluster does not serve", parent: metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "gadgets"}, condition: quadratic,
			warned: "not checked over example.com/v1 gadgets, its schema is not known"},
	}
	c := newCluster()
	c.serveExample()
	for _, k := range kinds {
		for _, tc := range cases {
			t.Run(k.resource+"/"+tc.name, func(t *testing.T) {
				store, _ := k.storage(t, controllerregistry.Options{ParentSchemas: c.schemas()})
				obj := k.object("health")
				setParent(obj, tc.parent, tc.condition)
				w := &warnings{}
				_, err := store.Create(k.as("alice", w), obj, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
				if tc.refused != "" {
					if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused) {
						t.Fatalf("create: %v; want Invalid with %q", err, tc.refused)
					}
					return
				}
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				warned := slices.ContainsFunc(w.text, func(s string) bool { return strings.HasPrefix(s, "spec.rollout.health.condition: ") })
				if tc.warned == "" && warned || tc.warned != "" && !slices.ContainsFunc(w.text, func(s string) bool { return strings.Contains(s, tc.warned) }) {
					t.Errorf("warnings %q; want one with %q", w.text, tc.warned)
				}
			})
		}
	}
}

// TestHealthConditionIsCheckedWhenItChanges: a condition written before
// the cluster served its parent's schema is accepted with a warning, and
// not checked again by edits that leave it and the parents alone (the
// schema may have changed since, as a stored CRD rule is not estimated
// again); a change of the condition is checked against the schema served
// now.
func TestHealthConditionIsCheckedWhenItChanges(t *testing.T) {
	costly := `parent.spec.items.all(x, parent.spec.items.all(y, x == y))`
	for _, k := range kinds {
		t.Run(k.resource, func(t *testing.T) {
			c := newCluster()
			store, _ := k.storage(t, controllerregistry.Options{ParentSchemas: c.schemas()})
			obj := k.object("later")
			setParent(obj, widgets, costly)
			w := &warnings{}
			stored := create(t, k.as("alice", w), store, obj)
			if !slices.ContainsFunc(w.text, func(s string) bool { return strings.Contains(s, "parent is dynamic") }) {
				t.Errorf("warnings %q; want one that the parent is dynamic", w.text)
			}
			c.serveExample()
			stored, err := edit(t, k.as("alice", nil), store, stored, func(_ runtime.Object, v view) { *v.hook = "http://hooks.default/v2" })
			if err != nil {
				t.Fatalf("an edit that leaves the condition: %v", err)
			}
			_, err = edit(t, k.as("alice", nil), store, stored, func(_ runtime.Object, v view) { v.setCondition(costly + " && true") })
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "estimated cost") {
				t.Fatalf("a changed condition: %v; want it refused for its cost", err)
			}
		})
	}
}

// stalled is a target cluster whose discovery does not answer.
type stalled struct{ answer chan struct{} }

func (s stalled) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	<-s.answer
	return schema.GroupVersionKind{}, fmt.Errorf("stalled")
}

// TestHealthConditionOfAStalledClusterIsWarnedOf: a target cluster that
// does not answer holds the write no longer than the look-up's timeout;
// the condition is then accepted, unchecked, with a warning that says so.
func TestHealthConditionOfAStalledClusterIsWarnedOf(t *testing.T) {
	k := kinds[0]
	s := stalled{answer: make(chan struct{})}
	t.Cleanup(func() { close(s.answer) })
	store, _ := k.storage(t, controllerregistry.Options{ParentSchemas: &controllerregistry.ParentSchemas{Kinds: s, Schemas: newCluster().schemas().Schemas}})
	obj := k.object("stalled")
	setParent(obj, widgets, `parent.spec.replicas > 0`)
	w := &warnings{}
	create(t, k.as("alice", w), store, obj)
	if !slices.ContainsFunc(w.text, func(s string) bool { return strings.Contains(s, "the target cluster did not answer within 3s") }) {
		t.Errorf("warnings %q; want one that the cluster did not answer", w.text)
	}
}
