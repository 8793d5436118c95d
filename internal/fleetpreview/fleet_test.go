package fleetpreview

import (
	"context"
	"reflect"
	"sort"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
)

func TestContinueTokensRoundTripAndOnlyTheirs(t *testing.T) {
	p := position{Namespace: "team-a", Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", Skip: 7}
	got, err := parsePosition(p.token())
	if err != nil || got != p {
		t.Errorf("parsePosition(token of %+v) = %+v, %v", p, got, err)
	}
	for _, bad := range []string{"not base64!", "bm90IGpzb24", position{Skip: -1}.token()} {
		if _, err := parsePosition(bad); !apierrors.IsBadRequest(err) {
			t.Errorf("parsePosition(%q) = %v, want a bad request", bad, err)
		}
	}
}

// The status a write would change, as apply.ParentStatus decides it: its
// observedGeneration counts, numbers compare by value.
func TestStatusDiffIsWhatTheStatusWriteWouldChange(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"metadata": map[string]interface{}{"name": "p", "generation": int64(2)},
		"status":   map[string]interface{}{"color": "blue", "children": int64(3), "observedGeneration": int64(2)},
	}}
	for _, tc := range []struct {
		name   string
		status map[string]interface{}
		want   []string
	}{
		{"the same, a number decoded as a float", map[string]interface{}{"color": "blue", "children": float64(3)}, nil},
		{"a field changes, one goes", map[string]interface{}{"color": "teal"}, []string{`- status.children: 3`, `status.color: "blue" -> "teal"`}},
	} {
		if got := statusDiff(parent, tc.status); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	parent.SetGeneration(3)
	if got := statusDiff(parent, map[string]interface{}{"color": "blue", "children": int64(3)}); !reflect.DeepEqual(got, []string{"status.observedGeneration: 2 -> 3"}) {
		t.Errorf("a new generation: %q", got)
	}
}

// A page's children are listed once per resource and namespace, and each
// parent gets its own and the orphans.
func TestPageChildrenListsOnceAndIndexesByController(t *testing.T) {
	cm := func(name string, owner types.UID) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
		obj.SetName(name)
		obj.SetNamespace("ns")
		if owner != "" {
			yes := true
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: string(owner), UID: owner, Controller: &yes}})
		}
		return obj
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"},
		cm("a-1", "a"), cm("b-1", "b"), cm("orphan", ""), cm("x-1", "x"))
	lists := 0
	client.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	page := newPageChildren(&target.Cluster{Dynamic: client}, nil, nil, map[types.UID]bool{"a": true, "b": true, "c": true})
	ctx := context.Background()
	for _, tc := range []struct {
		owner types.UID
		want  []string
	}{{"a", []string{"a-1", "orphan"}}, {"b", []string{"b-1", "orphan"}}, {"c", []string{"orphan"}}} {
		objs, err := page.Candidates(ctx, configMaps, "ns", tc.owner)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.GetName())
		}
		sort.Strings(names)
		if !reflect.DeepEqual(names, tc.want) {
			t.Errorf("candidates of %s: %v, want %v", tc.owner, names, tc.want)
		}
	}
	if got, _ := page.Get(ctx, configMaps, "ns", "b-1"); got == nil || got.GetName() != "b-1" {
		t.Errorf("Get b-1 = %v", got)
	}
	if lists != 1 {
		t.Errorf("%d lists, want 1", lists)
	}
	// The page keeps no copy of a child of a parent not on it (x), and
	// finds it by name all the same: the plan must not create it.
	if objs, _ := page.Candidates(ctx, configMaps, "ns", "x"); len(objs) != 1 || objs[0].GetName() != "orphan" {
		t.Errorf("candidates of a parent not on the page: %v, want the orphan only", objs)
	}
	if got, err := page.Get(ctx, configMaps, "ns", "x-1"); err != nil || got == nil || got.GetName() != "x-1" {
		t.Errorf("Get x-1 = %v, %v; want it, read by name", got, err)
	}
	if got, err := page.Get(ctx, configMaps, "ns", "missing"); err != nil || got != nil {
		t.Errorf("Get missing = %v, %v; want nothing", got, err)
	}
}

func TestTotalsAddUpThePlans(t *testing.T) {
	var totals v1alpha1.FleetPreviewTotals
	for _, p := range []v1alpha1.FleetPreviewParent{
		{Counts: v1alpha1.FleetPreviewCounts{Create: 1, Unchanged: 2}, Changes: []v1alpha1.SyncPlanItem{{Action: v1alpha1.SyncActionCreate}}},
		{Counts: v1alpha1.FleetPreviewCounts{Unchanged: 3}, StatusDiff: []string{"status.x: 1 -> 2"}},
		{Counts: v1alpha1.FleetPreviewCounts{Unchanged: 3}},
		{Error: "the hook failed"},
	} {
		addUp(&totals, &p)
	}
	want := v1alpha1.FleetPreviewTotals{Parents: 4, Changed: 2, Failed: 1, Counts: v1alpha1.FleetPreviewCounts{Create: 1, Unchanged: 8}}
	if totals != want {
		t.Errorf("totals %+v, want %+v", totals, want)
	}
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// fakeCaches holds one index, of configmaps.
type fakeCaches struct{ index engine.ChildIndex }

func (c fakeCaches) Children(gvr schema.GroupVersionResource) (engine.ChildIndex, bool) {
	return c.index, gvr == configMaps
}

func (c fakeCaches) Ownership() engine.FieldOwnership { return nil }

type oneChild struct{ obj *unstructured.Unstructured }

func (o oneChild) Candidates(context.Context, schema.GroupVersionResource, string, types.UID) ([]*unstructured.Unstructured, error) {
	return []*unstructured.Unstructured{o.obj}, nil
}

func (o oneChild) Get(context.Context, schema.GroupVersionResource, string, string) (*unstructured.Unstructured, error) {
	return o.obj, nil
}

// Where the loop caches a child resource, a page reads it from there, and
// only where the caller may list it: the cache holds what the server may
// read.
func TestPageChildrenReadTheLoopsCacheAsTheCallerMay(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"})
	client.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		t.Errorf("listed %s: the cache holds it", a.GetResource())
		return false, nil, nil
	})
	cached := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": "cached", "namespace": "ns"}}}
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetNamespace() == "ns" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	page := newPageChildren(&target.Cluster{Dynamic: client}, authz, fakeCaches{index: oneChild{cached}}, nil)
	ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "tenant"})
	objs, err := page.Candidates(ctx, configMaps, "ns", "uid")
	if err != nil || len(objs) != 1 || objs[0] != cached {
		t.Errorf("candidates %v, %v; want the cached one", objs, err)
	}
	if _, err := page.Candidates(ctx, configMaps, "other", "uid"); !apierrors.IsForbidden(err) {
		t.Errorf("candidates in a namespace the caller may not list: %v, want Forbidden", err)
	}
	if _, err := page.Get(ctx, configMaps, "other", "cached"); !apierrors.IsForbidden(err) {
		t.Errorf("get in a namespace the caller may not list: %v, want Forbidden", err)
	}
}
