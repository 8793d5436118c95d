package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// kustomizations are the kustomize install paths the READMEs name, each a
// directory of artifacts/.
var kustomizations = []string{"deploy", "etcd", "sharded", "sharded-etcd"}

// TestEveryInstallPathPassesPodSecurityRestricted installs the chart with
// its default values and with each ci/*-values.yaml, and each kustomization,
// into a namespace of its own that enforces PodSecurity "restricted" (and
// warns and audits at that level), for real: server-side apply, then the
// stack's kube-controller-manager makes the Pods of the Deployments and
// StatefulSets, and kube-apiserver admits each of them or refuses it, as on
// a cluster with nodes (here they stay Pending). Any warning of the apply
// (PodSecurity warns about a workload's pod template) fails the test, and so
// does a Pod that never comes.
//
// The objects of the install's namespace are applied there; the
// cluster-scoped ones and kube-system's RoleBinding are the stack's own
// (it runs artifacts/deploy's RBAC and APIService), so that
// TestChartIsValidAgainstKubeAPIServer and
// TestDeployManifestsAreValidAgainstKubeAPIServer prove them by a
// server-side dry run instead.
func TestEveryInstallPathPassesPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	installChartCRDs(t)
	modes, names := chartModes(t)
	for _, mode := range names {
		t.Run("chart-"+mode, func(t *testing.T) {
			ns := restrictedNamespace(t, "psa-chart-"+mode)
			rendered, err := framework.RenderChart(ns, modes[mode])
			if err != nil {
				t.Fatal(err)
			}
			installRestricted(t, ns, ns, rendered)
		})
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kustomizations {
		t.Run("kustomize-"+k, func(t *testing.T) {
			ns := restrictedNamespace(t, "psa-kustomize-"+k)
			rendered := mustKubectl(t, "kustomize", filepath.Join(root, "artifacts", k))
			installRestricted(t, framework.CompositeNamespace, ns, rendered)
		})
	}
}

// restrictedNamespace creates namespace name enforcing, warning about and
// auditing PodSecurity "restricted", as a cluster admin labels it, and
// proves that kube-apiserver enforces it there (a privileged Pod is
// refused): a test on a cluster without the PodSecurity plugin must fail,
// not pass.
func restrictedNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{}
	for _, mode := range []string{"enforce", "warn", "audit"} {
		labels["pod-security.kubernetes.io/"+mode] = "restricted"
		labels["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
	}
	if _, err := suite.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}) })
	if err := suite.EnsureDefaultServiceAccount(ctx, name); err != nil {
		t.Fatal(err)
	}
	// A Pod with no securityContext: admitted by "baseline", refused by
	// "restricted" alone (a privileged one would be refused by
	// kube-apiserver's --allow-privileged=false before PodSecurity sees it).
	unrestricted := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unrestricted"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	_, err := suite.Kube.CoreV1().Pods(name).Create(ctx, unrestricted, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("namespace %s admits a Pod without a restricted securityContext (err=%v): kube-apiserver does not enforce PodSecurity", name, err)
	}
	return name
}

// installRestricted applies the objects of rendered that belong to
// namespace from into namespace ns (framework.InstallNamespaced), fails on
// any warning, and waits until every Pod of its Deployments and
// StatefulSets has been admitted.
func installRestricted(t *testing.T, from, ns, rendered string) {
	t.Helper()
	ctx := context.Background()
	in, err := suite.InstallNamespaced(ctx, rendered, from, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range in.Warnings {
		t.Errorf("kubectl apply warned: %s", w)
	}
	if _, err := suite.WaitPods(ctx, ns, in.Pods); err != nil {
		t.Error(err)
	}
}

// installChartCRDs installs, once for the package, the CRDs of the kinds
// the chart renders besides Kubernetes's own: the Prometheus Operator's real
// ones, and stand-ins for cert-manager's. They stay for the package's life
// (its stack goes with it): the tests that use them run in parallel, and
// one removing them when it ended would pull them from under another.
func installChartCRDs(t *testing.T) {
	t.Helper()
	chartCRDsOnce.Do(func() { chartCRDsErr = applyChartCRDs(context.Background()) })
	if chartCRDsErr != nil {
		t.Fatal(chartCRDsErr)
	}
}

var (
	chartCRDsOnce sync.Once
	chartCRDsErr  error
)

// applyChartCRDs applies the chart's CRDs and waits until they are served.
func applyChartCRDs(ctx context.Context) error {
	for _, f := range []string{filepath.Join("testdata", "stub-crds.yaml"), filepath.Join("testdata", "prometheus-operator-crds.yaml")} {
		if _, stderr, err := suite.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", f); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w: %s", f, err, stderr)
		}
	}
	crds := []string{"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"}
	if _, stderr, err := suite.Kubectl(ctx, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, crds...)...); err != nil {
		return fmt.Errorf("the chart's CRDs are not established: %w: %s", err, stderr)
	}
	return nil
}
