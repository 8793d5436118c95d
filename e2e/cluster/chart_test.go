package cluster

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

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
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	// cert-manager's and the Prometheus Operator's kinds need their CRDs.
	installChartCRDs(t)

	modes, names := chartModes(t)
	kindsSeen := map[string]bool{}
	for _, mode := range names {
		t.Run(mode, func(t *testing.T) {
			ns := "chart-" + mode
			mustKubectl(t, "create", "namespace", ns)
			t.Cleanup(func() {
				_ = suite.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
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
	for _, kind := range []string{"Deployment", "StatefulSet", "PodDisruptionBudget", "Secret", "Certificate", "Issuer", "ServiceMonitor", "ClusterRoleBinding"} {
		if !kindsSeen[kind] {
			t.Errorf("no mode of the chart renders a %s", kind)
		}
	}
}

// chartModes are the chart's modes (framework.ChartModes) and their names
// in order.
func chartModes(t *testing.T) (map[string]string, []string) {
	t.Helper()
	modes, err := framework.ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(modes))
	for mode := range modes {
		names = append(names, mode)
	}
	sort.Strings(names)
	return modes, names
}

// resourceName is the object as `kubectl apply -o name` prints it.
func resourceName(o framework.Object) string {
	kind := strings.ToLower(o.Kind)
	if group, _, ok := strings.Cut(o.APIVersion, "/"); ok {
		kind += "." + group
	}
	return kind + "/" + o.Name
}

// TestEtcdOverlayIsValidAndRunsTheChartsEtcd applies `kubectl kustomize
// artifacts/etcd` (artifacts/deploy with the bundled etcd) as a server-side
// dry run, and holds its etcd and the server's etcd arguments to the
// chart's: two copies of one StatefulSet drift unless a test compares them.
func TestEtcdOverlayIsValidAndRunsTheChartsEtcd(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rendered := mustKubectl(t, "kustomize", filepath.Join(root, "artifacts", "etcd"))
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	var etcdSTS, deploy string
	for _, o := range objs {
		switch {
		case o.Kind == "Service" && o.Name == framework.CompositeService:
			// The stack's Service is an ExternalName one (loopback has no
			// endpoints); TestDeployManifestsAreValidAgainstKubeAPIServer
			// proves this one valid with a replace.
			continue
		case o.Kind == "StatefulSet":
			etcdSTS = o.YAML
		case o.Kind == "Deployment":
			deploy = o.YAML
		}
		docs = append(docs, o.YAML)
	}
	file := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustKubectl(t, "apply", "--dry-run=server", "-o", "name", "-f", file)
	if n := len(strings.Fields(out)); n != len(docs) {
		t.Errorf("applied %d of %d objects:\n%s", n, len(docs), out)
	}
	for _, want := range []string{"statefulset.apps/composite-apiserver-etcd", "service/composite-apiserver-etcd", "poddisruptionbudget.policy/composite-apiserver-etcd", "deployment.apps/composite-apiserver"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k artifacts/etcd would not apply %s:\n%s", want, out)
		}
	}

	chart, err := framework.RenderChart(framework.CompositeNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	chartObjs, err := framework.SplitManifests(chart)
	if err != nil {
		t.Fatal(err)
	}
	var chartSTS, chartDeploy string
	for _, o := range chartObjs {
		switch o.Kind {
		case "StatefulSet":
			chartSTS = o.YAML
		case "Deployment":
			chartDeploy = o.YAML
		}
	}
	var a, b appsv1.StatefulSet
	if err := yaml.Unmarshal([]byte(etcdSTS), &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(chartSTS), &b); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(a.Spec.Template.Spec.Containers, b.Spec.Template.Spec.Containers) ||
		!equality.Semantic.DeepEqual(a.Spec.Template.Spec.Volumes, b.Spec.Template.Spec.Volumes) ||
		!equality.Semantic.DeepEqual(a.Spec.Replicas, b.Spec.Replicas) {
		t.Errorf("artifacts/etcd's etcd differs from the chart's:\n artifacts/etcd: %+v %+v\n chart:          %+v %+v",
			a.Spec.Template.Spec.Containers, a.Spec.Template.Spec.Volumes, b.Spec.Template.Spec.Containers, b.Spec.Template.Spec.Volumes)
	}
	etcdArgs := func(doc string) []string {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(arg, "--etcd-") {
				out = append(out, arg)
			}
		}
		sort.Strings(out)
		return out
	}
	if got, want := etcdArgs(deploy), etcdArgs(chartDeploy); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("artifacts/etcd's server reaches etcd with %q, the chart's with %q", got, want)
	}
}

// TestChartKeepsItsCertificatesOnUpgrade: without cert-manager the chart
// generates its CAs and certificates at install, and an upgrade must keep
// them (a new serving CA, which the server puts in the APIService, while
// other pods still serve the old certificate would break the API until
// they reload; new etcd
// certificates would split members that restarted from those that did
// not). Rendered against a cluster holding the Secrets, as `helm upgrade`
// renders, the chart reuses them, the serving CA among them;
// rendered offline twice, it generates anew each time, so it is the
// lookup that keeps them.
func TestChartKeepsItsCertificatesOnUpgrade(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	const ns = "chart-upgrade"
	mustKubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { _ = suite.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })

	install, err := framework.RenderChart(ns, "")
	if err != nil {
		t.Fatal(err)
	}
	installed := chartCerts(t, install)
	// What `helm install` would have created: the Secrets.
	var secrets []string
	objs, err := framework.SplitManifests(install)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind == "Secret" {
			secrets = append(secrets, o.YAML)
		}
	}
	file := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(secrets, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-f", file)

	upgrade, err := framework.RenderChartAgainst(suite.AdminKubeconfig, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	upgraded := chartCerts(t, upgrade)
	for k, v := range installed {
		if upgraded[k] != v {
			t.Errorf("an upgrade changes %s", k)
		}
	}
	again, err := framework.RenderChart(ns, "")
	if err != nil {
		t.Fatal(err)
	}
	const servingCA = "Secret composite-apiserver-serving-cert ca.crt"
	if chartCerts(t, again)[servingCA] == installed[servingCA] {
		t.Errorf("two offline renders made the same CA: the test cannot tell the lookup from a fixed certificate")
	}
}

// chartCerts are the rendered Secrets' data, by name.
func chartCerts(t *testing.T, rendered string) map[string]string {
	t.Helper()
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		var body struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(o.YAML), &body); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "Secret" {
			for k, v := range body.Data {
				out["Secret "+o.Name+" "+k] = v
			}
		}
	}
	if len(out) != 9 {
		t.Fatalf("want 3 Secrets of 3 keys, got %d entries: %v", len(out), keysOf(out))
	}
	return out
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
