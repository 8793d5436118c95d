package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// crudCRD serves the CompositeController's shape as a CRD: cluster-scoped
// like it, with a status subresource like it, and a schema that takes any
// spec, so that the CRD's cost is kube-apiserver's own, not validation.
var crudCRD = framework.CRD{Group: "bench.example.com", Plural: "compositecontrollers", Kind: "CompositeController", Version: "v1alpha1", ClusterScoped: true}.Manifest()

var (
	aggregatedGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	crdGVR        = schema.GroupVersionResource{Group: "bench.example.com", Version: "v1alpha1", Resource: "compositecontrollers"}
)

// crudKind is one of the two ways the same objects are served.
type crudKind struct {
	name   string
	client dynamic.ResourceInterface
	apiVer string

	mu                   sync.Mutex
	creates, gets, lists []time.Duration
}

func (k *crudKind) note(list *[]time.Duration, d time.Duration) {
	k.mu.Lock()
	*list = append(*list, d)
	k.mu.Unlock()
}

// object is CompositeController name as the benchmarks' controllers are,
// labelled for the lists.
func (k *crudKind) object(name, label string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": k.apiVer,
		"kind":       "CompositeController",
		"metadata": map[string]interface{}{
			"name":   name,
			"labels": map[string]interface{}{"bench": label},
		},
		"spec": map[string]interface{}{
			"generateSelector": true,
			"parentResource": map[string]interface{}{
				"apiVersion": "example.com/v1",
				"resource":   "hellos",
				// No parent has this label: with -crud.loop the
				// controllers started for these objects sync nothing.
				"labelSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"bench": name}},
			},
			"childResources": []interface{}{map[string]interface{}{
				"apiVersion":     "v1",
				"resource":       "configmaps",
				"updateStrategy": map[string]interface{}{"method": "InPlace"},
			}},
			"hooks": map[string]interface{}{"sync": map[string]interface{}{"webhook": map[string]interface{}{
				"url": env.hook.srv.URL + "/bench-crud/sync", "timeout": "30s",
			}}},
		},
	}}
}

// BenchmarkCRUD (B5) measures CompositeControllers through kube-apiserver
// (aggregated: kube-apiserver proxies to composite-apiserver, which
// authorizes with a SubjectAccessReview and stores in its own etcd prefix)
// against the same objects served as a CRD by the same kube-apiserver:
// crud.objects creates, as many gets, and crud.lists lists of them all,
// the two kinds interleaved so that the machine's load falls on both
// alike. Both go through the same dynamic client, so that client-side
// decoding is the same too.
//
// Unless -crud.loop, composite-apiserver runs without its controller loop
// for the benchmark (and is restarted with it after): with the loop, each
// created CompositeController starts a controller, work that is not the
// request's and that would share the 2 cores with the requests measured.
func BenchmarkCRUD(b *testing.B) {
	setUp(b)
	ctx := context.Background()
	if err := suite.Apply(ctx, crudCRD); err != nil {
		b.Fatal(err)
	}
	if _, stderr, err := suite.Kubectl(ctx, "wait", "--for=condition=Established", "crd/compositecontrollers.bench.example.com", "--timeout=60s"); err != nil {
		b.Fatalf("CRD compositecontrollers.bench.example.com not established: %v: %s", err, stderr)
	}
	if !*crudLoop {
		if err := restartComposite(ctx, "--controller-loop=false"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := restartComposite(context.Background()); err != nil {
				b.Errorf("can't restart composite-apiserver with its loop: %v", err)
			}
		})
	}
	label := uniqueName("bench-crud")
	kinds := []*crudKind{
		{name: "aggregated", client: env.dyn.Resource(aggregatedGVR), apiVer: "metacontroller.k8s.io/v1alpha1"},
		{name: "crd", client: env.dyn.Resource(crdGVR), apiVer: "bench.example.com/v1alpha1"},
	}
	agg, crd := kinds[0], kinds[1]
	b.Cleanup(func() {
		for _, k := range kinds {
			_ = k.client.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench in (" + label + "," + label + "-warm)"})
		}
	})
	n := *crudObjects
	// in runs op on both kinds, in an order that alternates with i, so
	// that neither always comes first.
	in := func(i int, op func(k *crudKind) error) error {
		order := kinds
		if i%2 == 1 {
			order = []*crudKind{kinds[1], kinds[0]}
		}
		for _, k := range order {
			if err := op(k); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
		}
		return nil
	}

	// Warm connections, discovery and the aggregated server's authorization
	// cache up; not measured.
	if _, err := forEach(ctx, 20, *crudConcurrency, func(ctx context.Context, i int) error {
		return in(i, func(k *crudKind) error {
			name := fmt.Sprintf("%s-warm-%d", label, i)
			if _, err := k.client.Create(ctx, k.object(name, label+"-warm"), metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := k.client.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
			_, err := k.client.List(ctx, metav1.ListOptions{LabelSelector: "bench=" + label + "-warm"})
			return err
		})
	}); err != nil {
		b.Fatalf("warm-up: %v", err)
	}

	b.ResetTimer()
	if _, err := forEach(ctx, n, *crudConcurrency, func(ctx context.Context, i int) error {
		return in(i, func(k *crudKind) error {
			obj := k.object(fmt.Sprintf("%s-%d", label, i), label)
			start := time.Now()
			_, err := k.client.Create(ctx, obj, metav1.CreateOptions{})
			k.note(&k.creates, time.Since(start))
			return err
		})
	}); err != nil {
		b.Fatalf("create: %v", err)
	}
	if _, err := forEach(ctx, n, *crudConcurrency, func(ctx context.Context, i int) error {
		return in(i, func(k *crudKind) error {
			start := time.Now()
			_, err := k.client.Get(ctx, fmt.Sprintf("%s-%d", label, i), metav1.GetOptions{})
			k.note(&k.gets, time.Since(start))
			return err
		})
	}); err != nil {
		b.Fatalf("get: %v", err)
	}
	for i := 0; i < *crudLists; i++ {
		if err := in(i, func(k *crudKind) error {
			start := time.Now()
			list, err := k.client.List(ctx, metav1.ListOptions{LabelSelector: "bench=" + label})
			k.note(&k.lists, time.Since(start))
			if err != nil {
				return err
			}
			if len(list.Items) != n {
				return fmt.Errorf("listed %d objects, want %d", len(list.Items), n)
			}
			return nil
		}); err != nil {
			b.Fatalf("list: %v", err)
		}
	}
	b.StopTimer()

	p := func(d []time.Duration, q float64) float64 { return ms(percentile(sortedCopy(d), q)) }
	b.ReportMetric(0, "ns/op")
	for _, m := range []struct {
		unit string
		list func(k *crudKind) []time.Duration
	}{
		{"create", func(k *crudKind) []time.Duration { return k.creates }},
		{"get", func(k *crudKind) []time.Duration { return k.gets }},
		{"list", func(k *crudKind) []time.Duration { return k.lists }},
	} {
		a, c := m.list(agg), m.list(crd)
		b.ReportMetric(p(a, 0.5), m.unit+"-p50-ms")
		b.ReportMetric(p(a, 0.99), m.unit+"-p99-ms")
		b.ReportMetric(p(c, 0.5), "crd-"+m.unit+"-p50-ms")
		b.ReportMetric(p(c, 0.99), "crd-"+m.unit+"-p99-ms")
		b.ReportMetric(p(a, 0.5)/p(c, 0.5), m.unit+"-ratio")
		b.Logf("crud: %d %ss of each kind (%d objects, concurrency %d): aggregated p50 %.1f ms, p99 %.1f ms; CRD p50 %.1f ms, p99 %.1f ms; p50 %.2f× the CRD's",
			len(a), m.unit, n, *crudConcurrency, p(a, 0.5), p(a, 0.99), p(c, 0.5), p(c, 0.99), p(a, 0.5)/p(c, 0.5))
	}
	b.ReportMetric(float64(n), "objects")
}

// restartComposite restarts composite-apiserver with extraArgs beyond the
// benchmarks' flags and waits until kube-apiserver proxies to it again.
func restartComposite(ctx context.Context, extraArgs ...string) error {
	if err := suite.StopComposite(); err != nil {
		return err
	}
	if err := suite.StartComposite(ctx, extraArgs...); err != nil {
		return err
	}
	// The aggregator may take a moment to see the new process; a list
	// through it is what the benchmarks need.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = env.dyn.Resource(aggregatedGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("composite-apiserver not reachable through kube-apiserver after its restart (last: %v): %w", last, err)
	}
	return nil
}
