package bench

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var writeCostObjects = flag.Int("writecost.objects", 3000, "BenchmarkWriteCost: objects written per kind and iteration")

// BenchmarkWriteCost (B12) measures what one write of each kind the loop
// makes costs kube-apiserver and etcd, in CPU per object: an Event (what
// the loop records about a parent's children), a ConfigMap created, and a
// ConfigMap server-side-applied (a child). Written as composite-apiserver's
// identity (a ServiceAccount token, not system:masters), in protobuf as
// the loop's Events are, by 8 workers, in one namespace. The Events are the
// ones --child-events-qps budgets: this is what each costs the cluster.
func BenchmarkWriteCost(b *testing.B) {
	setUp(b)
	ctx := context.Background()
	if err := suite.Apply(ctx, framework.HelloControllerRights); err != nil {
		b.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.CompositeIdentity)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 1000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client := kubernetes.NewForConfigOrDie(cfg)
	ns := uniqueName("bench-writecost")
	if err := suite.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	// The aggregated ClusterRole takes a moment to hold the rights.
	time.Sleep(5 * time.Second)
	n := *writeCostObjects
	now := metav1.Now()
	writes := []struct {
		name  string
		write func(i int, round string) error
	}{
		{"event", func(i int, round string) error {
			_, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("p%s-%d.%x", round, i, time.Now().UnixNano()), Namespace: ns},
				InvolvedObject: corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "Hello", Namespace: ns, Name: fmt.Sprintf("p%d", i)},
				Reason:         "ChildCreated", Message: "Create ConfigMap a, b, c, d, e and 5 more: returned by the hook and not observed", Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: "composite-apiserver"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
			}, metav1.CreateOptions{})
			return err
		}},
		{"configmap-create", func(i int, round string) error {
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%s-%d", round, i), Namespace: ns}, Data: map[string]string{"color": "blue"},
			}, metav1.CreateOptions{})
			return err
		}},
		{"configmap-apply", func(i int, round string) error {
			cm := applycorev1.ConfigMap(fmt.Sprintf("a%s-%d", round, i), ns).WithData(map[string]string{"color": "blue"})
			_, err := client.CoreV1().ConfigMaps(ns).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "metacontroller.k8s.io/bench", Force: true})
			return err
		}},
	}
	for _, w := range writes {
		b.Run(w.name, func(b *testing.B) {
			var apiserver, etcd float64
			for iter := range b.N {
				a0, e0 := cpuSeconds(b, suite.KubeAPIServerCPUSeconds), cpuSeconds(b, suite.EtcdCPUSeconds)
				// Names of their own: a create, not an AlreadyExists, nor an
				// apply that changes nothing, in every run (-count).
				round := uniqueName(fmt.Sprint(iter))
				if _, err := forEach(ctx, n, 8, func(_ context.Context, i int) error { return w.write(i, round) }); err != nil {
					b.Fatal(err)
				}
				// What the writes leave to do (etcd's compaction aside)
				// is done within a second or two.
				time.Sleep(2 * time.Second)
				apiserver += cpuSeconds(b, suite.KubeAPIServerCPUSeconds) - a0
				etcd += cpuSeconds(b, suite.EtcdCPUSeconds) - e0
			}
			objects := float64(n * b.N)
			b.ReportMetric(apiserver*1000/objects, "apiserver-cpu-ms/object")
			b.ReportMetric(etcd*1000/objects, "etcd-cpu-ms/object")
		})
	}
}

func cpuSeconds(b *testing.B, of func() (float64, error)) float64 {
	b.Helper()
	s, err := of()
	if err != nil {
		b.Fatal(err)
	}
	return s
}
