package parentloop

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
)

var (
	countsParents  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}
	countsChildren = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// countsLoop is a parent loop of def on Hellos with ConfigMap children,
// whose informers come from a pool, as the loop's do, and hold only what
// the caller adds to their caches.
func countsLoop(tb testing.TB, def *definition.Definition) *parentLoop {
	client := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		countsParents: "HelloList", countsChildren: "ConfigMapList",
	})
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	pool := sharedinformers.NewPool(client, stop)
	pc := &parentLoop{
		rec:      &reconcile.Controller{Def: def},
		parents:  pool.Acquire(countsParents),
		children: map[schema.GroupVersionResource]informers.GenericInformer{countsChildren: pool.Acquire(countsChildren)},
	}
	// Once the empty lists are in, only what is added here is cached.
	if !cache.WaitForCacheSync(stop, pc.parents.Informer().HasSynced, pc.children[countsChildren].Informer().HasSynced) {
		tb.Fatal("the informers did not sync")
	}
	return pc
}

func addHello(tb testing.TB, pc *parentLoop, name string, labels map[string]string, mutate func(*unstructured.Unstructured)) types.UID {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Hello")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetLabels(labels)
	if mutate != nil {
		mutate(u)
	}
	if err := pc.parents.Informer().GetIndexer().Add(u); err != nil {
		tb.Fatal(err)
	}
	return u.GetUID()
}

func addConfigMap(tb testing.TB, pc *parentLoop, name string, controller types.UID, annotations map[string]string) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetAnnotations(annotations)
	if controller != "" {
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: "p", UID: controller, Controller: &yes}})
	}
	if err := pc.children[countsChildren].Informer().GetIndexer().Add(u); err != nil {
		tb.Fatal(err)
	}
}

// A controller's status counts its selected parents, the children they
// control (a decorator's only when they carry its annotation), the parents
// mid-rollout and the paused ones; not another parent's children, orphans,
// or parents its selector leaves out.
func TestCountsParentsChildrenRollingPaused(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  *definition.Definition
		want Counts
	}{
		{"composite", &definition.Definition{Kind: definition.KindComposite, ParentLabels: labels.SelectorFromSet(labels.Set{"app": "web"})},
			Counts{Parents: 3, Children: 4, Rolling: 1, Paused: 1}},
		{"decorator", &definition.Definition{Kind: definition.KindDecorator, Name: "deco", ChildAnnotation: "decorator",
			ParentLabels: labels.SelectorFromSet(labels.Set{"app": "web"})},
			Counts{Parents: 3, Children: 1, Rolling: 1, Paused: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := countsLoop(t, tc.def)
			web := map[string]string{"app": "web"}
			plain := addHello(t, pc, "plain", web, nil)
			rolling := addHello(t, pc, "rolling", web, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"type": "Updated", "status": "False"}}, "status", "conditions")
			})
			addHello(t, pc, "paused", web, func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{v1alpha1.ParentPausedAnnotation: "true"})
			})
			other := addHello(t, pc, "not-selected", map[string]string{"app": "db"}, nil)
			addConfigMap(t, pc, "plain-1", plain, map[string]string{"decorator": "deco"})
			addConfigMap(t, pc, "plain-2", plain, nil)
			addConfigMap(t, pc, "rolling-1", rolling, map[string]string{"decorator": "another"})
			addConfigMap(t, pc, "rolling-2", rolling, nil)
			addConfigMap(t, pc, "other-1", other, map[string]string{"decorator": "deco"})
			addConfigMap(t, pc, "orphan", "", map[string]string{"decorator": "deco"})
			addConfigMap(t, pc, "of-a-deleted-parent", "uid-gone", nil)
			if got := pc.counts(); got != tc.want {
				t.Errorf("counts %+v, want %+v", got, tc.want)
			}
		})
	}
}

// BenchmarkCounts is one count of a controller's status among 10,000
// parents × 10 ConfigMaps, as B2's largest size has them.
func BenchmarkCounts(b *testing.B) {
	pc := countsLoop(b, &definition.Definition{Kind: definition.KindComposite, ParentLabels: labels.Everything()})
	const parents, children = 10000, 10
	for i := range parents {
		uid := addHello(b, pc, fmt.Sprintf("p%d", i), map[string]string{"app": "web"}, nil)
		for j := range children {
			addConfigMap(b, pc, fmt.Sprintf("p%d-%d", i, j), uid, nil)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := pc.counts(); n.Children != parents*children {
			b.Fatalf("counted %d children", n.Children)
		}
	}
}
