package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// observedChildren are present in every invalid-answer case, so that a plan
// built in spite of the error would show deletes.
func observedChildren() Claimed {
	return Claimed{Owned: []*unstructured.Unstructured{
		owned(cm("a", "blue")),
		owned(cm("b", "blue")),
		owned(object("apps/v1", "Deployment", parentNS, "web", "spec.replicas", int64(1))),
	}}
}

func TestComputeRejectsInvalidAnswers(t *testing.T) {
	without := func(obj *unstructured.Unstructured, fields ...string) *unstructured.Unstructured {
		unstructured.RemoveNestedField(obj.Object, fields...)
		return obj
	}
	selfChild := object("example.com/v1", "Thing", parentNS, "p")

	for _, tc := range []struct {
		name        string
		controller  *v1alpha1.CompositeController
		parent      *unstructured.Unstructured
		resp        *hookapi.SyncHookResponse
		wantProblem string
	}{
		{
			name:        "child without apiVersion",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue"), without(cm("c", "x"), "apiVersion")}},
			wantProblem: "children[1] (ConfigMap c) has no apiVersion",
		},
		{
			name:        "child without kind",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{without(cm("c", "x"), "kind")}},
			wantProblem: "children[0] (v1 c) has no kind",
		},
		{
			name:        "child without name",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{without(cm("c", "x"), "metadata", "name")}},
			wantProblem: "children[0] (ConfigMap v1) has no metadata.name",
		},
		{
			name:        "child with a non-string name",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "c", "metadata.name", int64(3))}},
			wantProblem: "has a malformed metadata.name",
		},
		{
			// Read as no namespace, it would be defaulted to the parent's.
			name:        "child with a non-string namespace",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "c", "metadata.namespace", map[string]interface{}{"name": "other"})}},
			wantProblem: "children[0] (ConfigMap v1 c) has a malformed metadata.namespace: map[string]interface {}, not a string",
		},
		{
			name:        "child with an unparseable apiVersion",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("a/b/c", "ConfigMap", parentNS, "c")}},
			wantProblem: `children[0] has an invalid apiVersion "a/b/c"`,
		},
		{
			name:        "child of an undeclared type",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue"), object("v1", "Pod", parentNS, "x")}},
			wantProblem: "child Pod.v1 ns/x: pods (v1) is not one of the controller's childResources",
		},
		{
			name:        "child of a declared resource in another version",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("apps/v1beta1", "Deployment", parentNS, "web")}},
			wantProblem: "deployments.apps (apps/v1beta1) is not one of the controller's childResources",
		},
		{
			name:        "child in another namespace",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", "other", "a")}},
			wantProblem: "child ConfigMap.v1 other/a is in namespace other, not the parent's namespace ns",
		},
		{
			name:        "cluster-scoped child of a namespaced parent",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "Namespace", "", "team")}},
			wantProblem: "child Namespace.v1 team: namespaces is cluster-scoped; a namespaced parent can only have children in its own namespace",
		},
		{
			name:   "namespaced child of a cluster-scoped parent without a namespace",
			parent: func() *unstructured.Unstructured { p := newParent(); p.SetNamespace(""); return p }(),
			resp:   &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", "", "a")}},
			wantProblem: "child ConfigMap.v1 a: configmaps is namespaced and the parent is cluster-scoped, " +
				"so the child must set metadata.namespace",
		},
		{
			name:        "cluster-scoped child with a namespace under a cluster-scoped parent",
			parent:      func() *unstructured.Unstructured { p := newParent(); p.SetNamespace(""); return p }(),
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "Namespace", "x", "team")}},
			wantProblem: "namespaces is cluster-scoped but the child sets metadata.namespace x",
		},
		{
			name:        "duplicate child",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue"), cm("b", "x"), object("v1", "ConfigMap", "", "a")}},
			wantProblem: "child ConfigMap.v1 ns/a is returned more than once",
		},
		{
			name: "child equal to the parent",
			controller: newController(func(cc *v1alpha1.CompositeController) {
				cc.Spec.ChildResources = append(cc.Spec.ChildResources, childRule("example.com/v1", "things", ""))
			}),
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{selfChild}},
			wantProblem: "child Thing.example.com/v1 ns/p is the parent itself",
		},
		{
			name:        "child whose labels do not match the parent's selector",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "a", "metadata.labels.app", "q")}},
			wantProblem: `child ConfigMap.v1 ns/a: its labels app=q do not match the parent's selector "app=p"`,
		},
		{
			name:        "child with labels that are not strings",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "a", "metadata.labels.n", int64(1))}},
			wantProblem: "metadata.labels must map strings to strings",
		},
		{
			name:        "null child",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue"), nil}},
			wantProblem: "children[1] is null",
		},
		{
			name:        "no response",
			resp:        nil,
			wantProblem: "the hook returned no response",
		},
		{
			name:        "resyncAfterSeconds that is not a number",
			resp:        &hookapi.SyncHookResponse{ResyncAfterSeconds: math.NaN(), Children: []*unstructured.Unstructured{cm("a", "blue")}},
			wantProblem: "resyncAfterSeconds is NaN",
		},
		{
			name:        "child with a value JSON can't carry",
			resp:        &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{object("v1", "ConfigMap", parentNS, "a", "data.x", math.Inf(1))}},
			wantProblem: "children[0] (ConfigMap.v1 a) is not a valid object",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, parent := tc.controller, tc.parent
			if cc == nil {
				cc = newController()
			}
			if parent == nil {
				parent = newParent()
			}
			hook := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
				return tc.resp, nil
			})
			plan, err := Compute(context.Background(), newInput(cc, parent, observedChildren(), hook))
			if plan != nil || hasDelete(plan) {
				t.Fatalf("got a plan %v for an invalid answer", summary(plan))
			}
			var invalid *InvalidResponseError
			if !errors.As(err, &invalid) {
				t.Fatalf("error %v is not an *InvalidResponseError", err)
			}
			if invalid.Hook != definition.HookSync || invalid.Controller != "things" {
				t.Errorf("error names hook %q of %q, want sync of things", invalid.Hook, invalid.Controller)
			}
			if !containsProblem(invalid.Problems, tc.wantProblem) {
				t.Errorf("problems %q do not include %q", invalid.Problems, tc.wantProblem)
			}
			if !strings.Contains(err.Error(), tc.wantProblem) {
				t.Errorf("error %q does not name %q", err, tc.wantProblem)
			}
		})
	}
}

func containsProblem(problems []string, want string) bool {
	for _, p := range problems {
		if strings.Contains(p, want) {
			return true
		}
	}
	return false
}

func TestComputeReportsEveryProblem(t *testing.T) {
	hook := returning(
		object("v1", "Pod", parentNS, "x"),
		object("v1", "ConfigMap", "other", "a"),
		cm("b", "x"), cm("b", "y"),
	)
	_, err := Compute(context.Background(), newInput(newController(), newParent(), observedChildren(), hook))
	var invalid *InvalidResponseError
	if !errors.As(err, &invalid) {
		t.Fatalf("error %v is not an *InvalidResponseError", err)
	}
	if len(invalid.Problems) != 3 {
		t.Errorf("got %d problems, want 3: %q", len(invalid.Problems), invalid.Problems)
	}
	for _, p := range invalid.Problems {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not list %q", err, p)
		}
	}
}

// listerFunc is an ObjectLister of one function; it knows no namespaces.
type listerFunc func(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error)

func (f listerFunc) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	return f(ctx, gvr, namespace, selector)
}

func (f listerFunc) Namespaces(context.Context, labels.Selector) ([]string, error) { return nil, nil }

// byName is a ChildIndex of a few objects, found by name only.
type byName []*unstructured.Unstructured

func (b byName) Candidates(context.Context, schema.GroupVersionResource, string, types.UID) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func (b byName) Get(_ context.Context, _ schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range b {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, nil
}

// mapperResolver knows the kinds of the tests, both ways, as discovery
// would.
func mapperResolver() definition.KindResolver {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"}, meta.RESTScopeNamespace},
	} {
		m.Add(k.gvk, k.scope)
	}
	return definition.RESTMapperResolver(m)
}

type failingResolver struct{ err error }

func (r failingResolver) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	return schema.GroupVersionResource{}, false, r.err
}

func (r failingResolver) KindFor(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return schema.GroupVersionKind{}, definition.ErrNoKinds
}

func TestComputeFailuresYieldNoPlan(t *testing.T) {
	configMapRule := []*hookapi.RelatedResourceRule{{APIVersion: "v1", Resource: "configmaps"}}
	customizing := func(resp *hookapi.CustomizeHookResponse, err error) hookapi.CustomizeHook {
		return hookapi.CustomizeHookFunc(func(ctx context.Context, req *hookapi.CustomizeHookRequest) (*hookapi.CustomizeHookResponse, error) {
			return resp, err
		})
	}
	failingSync := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		return nil, errors.New("database on fire")
	})

	for _, tc := range []struct {
		name        string
		modify      func(*Input)
		wantErr     string
		wantInvalid bool
	}{
		{
			name:    "sync hook error",
			modify:  func(in *Input) { in.Hooks.Sync = InProcess(failingSync) },
			wantErr: "sync hook: database on fire",
		},
		{
			name: "finalize hook error",
			modify: func(in *Input) {
				in.Parent = deleting(newParent())
				in.Hooks.Finalize = InProcess(failingSync)
			},
			wantErr: "finalize hook: database on fire",
		},
		{
			name: "customize hook error",
			modify: func(in *Input) {
				in.Definition = recompiled(in.Definition, withCustomize)
				in.Hooks.Customize = customizing(nil, errors.New("no idea"))
			},
			wantErr: "customize hook: no idea",
		},
		{
			name: "customize hook answers an invalid rule",
			modify: func(in *Input) {
				in.Definition = recompiled(in.Definition, withCustomize)
				in.Hooks.Customize = customizing(&hookapi.CustomizeHookResponse{
					RelatedResourceRules: []*hookapi.RelatedResourceRule{{Resource: "configmaps"}, nil},
				}, nil)
			},
			wantErr:     "relatedResources[0] has no apiVersion; relatedResources[1] is null",
			wantInvalid: true,
		},
		{
			name: "related objects can't be read",
			modify: func(in *Input) {
				in.Definition = recompiled(in.Definition, withCustomize)
				in.Hooks.Customize = customizing(&hookapi.CustomizeHookResponse{RelatedResourceRules: configMapRule}, nil)
				in.Resolver = mapperResolver()
				in.Related = listerFunc(func(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
					return nil, errors.New("forbidden")
				})
			},
			wantErr: "can't get the related objects of configmaps (v1) the customize hook asked for: forbidden",
		},
		{
			name:    "discovery fails",
			modify:  func(in *Input) { in.Resolver = failingResolver{errors.New("discovery is down")} },
			wantErr: "discovery is down",
		},
		{
			name: "the cluster does not serve the child's kind",
			modify: func(in *Input) {
				in.Resolver = failingResolver{&meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, SearchedVersions: []string{"v1"}}}
			},
			wantErr:     `child ConfigMap.v1 ns/a: no matches for kind "ConfigMap" in version "v1"`,
			wantInvalid: true,
		},
		{
			name:    "no sync hook",
			modify:  func(in *Input) { in.Hooks.Sync = nil },
			wantErr: "no sync hook",
		},
		{
			name:    "no resolver",
			modify:  func(in *Input) { in.Resolver = nil },
			wantErr: "no KindResolver",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInput(newController(withFinalize), newParent(), observedChildren(), returning(cm("a", "green")))
			tc.modify(&in)
			plan, err := Compute(context.Background(), in)
			if plan != nil {
				t.Fatalf("got a plan %v, want none", summary(plan))
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			var invalid *InvalidResponseError
			if got := errors.As(err, &invalid); got != tc.wantInvalid {
				t.Errorf("errors.As(*InvalidResponseError) = %v, want %v", got, tc.wantInvalid)
			}
		})
	}
}
