package cluster

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestChartIsValidAgainstKubeAPIServer renders the chart (helm template with
// the pinned helm) with its default values and with each ci/*-values.yaml,
// and has kube-apiserver accept every rendered object (kubectl apply
// --dry-run=server): the chart's manifests are what
// TestDeployManifestsAreValidAgainstKubeAPIServer proves artifacts/deploy's
// are. Each mode renders into a namespace of its own, made for the test, so
// that the dry run does not merge into the stack's own objects there.
func TestChartIsValidAgainstKubeAPIServer(t *testing.T) {
	dumpLogsOnFailure(t)
	ctx := context.Background()
	// cert-manager's and the Prometheus Operator's kinds need their CRDs;
	// stand-ins whose real ones cannot be fetched here.
	mustKubectl(t, "apply", "-f", filepath.Join("testdata", "stub-crds.yaml"))
	mustKubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io", "crd/servicemonitors.monitoring.coreos.com")

	modes, err := framework.ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(modes))
	for mode := range modes {
		names = append(names, mode)
	}
	sort.Strings(names)
	kindsSeen := map[string]bool{}
	for _, mode := range names {
		t.Run(mode, func(t *testing.T) {
			ns := "chart-" + mode
			mustKubectl(t, "create", "namespace", ns)
			t.Cleanup(func() {
				_ = stack.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			})
			rendered, err := framework.RenderChart(ns, modes[mode])
			if err != nil {
				t.Fatal(err)
			}
			objs, err := framework.SplitManifests(rendered)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "rendered.yaml")
			if err := os.WriteFile(file, []byte(rendered), 0o644); err != nil {
				t.Fatal(err)
			}
			out := mustKubectl(t, "apply", "--dry-run=server", "-o", "name", "-f", file)
			accepted := map[string]bool{}
			for _, line := range strings.Fields(out) {
				accepted[line] = true
			}
			for _, o := range objs {
				kindsSeen[o.Kind] = true
				if name := resourceName(o); !accepted[name] {
					t.Errorf("kube-apiserver did not report %s as applied (dry run); it reported:\n%s", name, out)
				}
			}
			if len(accepted) != len(objs) {
				t.Errorf("rendered %d objects, kube-apiserver applied %d:\n%s", len(objs), len(accepted), out)
			}
		})
	}
	for _, kind := range []string{"Deployment", "StatefulSet", "PodDisruptionBudget", "APIService", "Secret", "Certificate", "Issuer", "ServiceMonitor", "ClusterRoleBinding"} {
		if !kindsSeen[kind] {
			t.Errorf("no mode of the chart renders a %s", kind)
		}
	}
}

// resourceName is the object as `kubectl apply -o name` prints it.
func resourceName(o framework.Object) string {
	kind := strings.ToLower(o.Kind)
	if group, _, ok := strings.Cut(o.APIVersion, "/"); ok {
		kind += "." + group
	}
	return kind + "/" + o.Name
}
