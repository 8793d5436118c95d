package podexamples

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestTheChartsPodsScheduleAndADrainKeepsTheirBudgets installs the chart
// as a user does (`helm install --wait`, the bundled etcd, hardAntiAffinity
// on, an image that is never pulled: no container runs on kwok's nodes)
// and sees what the scheduler and kube-controller-manager make of it:
// every pod of the server and of each etcd member scheduled on a node of
// its own kind and Running, each member's claim Bound, and both
// PodDisruptionBudgets counting them. Then `kubectl drain` of the node of
// an etcd member succeeds, evicting one pod per budget; the member cannot
// move (hard anti-affinity over three nodes), so its budget allows no more
// disruptions, and draining the node of a second member is refused by
// that budget: the second member keeps running, and etcd keeps a quorum.
func TestTheChartsPodsScheduleAndADrainKeepsTheirBudgets(t *testing.T) {
	ctx := context.Background()
	const release, ns = "podchart", "podchart-system"
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := (&example{}).jsonpath([]string{"nodes"}, "{.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = framework.HelmAgainst(suite.AdminKubeconfig, "uninstall", release, "-n", ns, "--wait", "--timeout=60s")
		_, _, _ = suite.Kubectl(context.Background(), append([]string{"uncordon"}, strings.Fields(nodes)...)...)
	})
	if out, err := framework.HelmAgainst(suite.AdminKubeconfig, "install", release, chart, "--namespace", ns, "--create-namespace",
		"--set", "image.repository=registry.invalid/composite-apiserver", "--set", "image.tag=never-pulled",
		"--set", "fullnameOverride=podchart-apiserver", // beside the stack's own install
		"--set", "hardAntiAffinity=true", "--wait", "--timeout=5m"); err != nil {
		t.Fatalf("helm install --wait: %v\n%s", err, out)
	}
	ex := &example{ns: ns}

	// Every pod scheduled, on distinct nodes per workload, and Running.
	pods := ex.rows(t, []string{"pods"}, `{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}`)
	if len(pods) != 5 {
		t.Fatalf("%d pods, want 2 server replicas and 3 etcd members:\n%s", len(pods), strings.Join(pods, "\n"))
	}
	nodeOf := map[string]string{}
	for _, p := range pods {
		f := strings.Fields(p)
		if len(f) != 3 || f[1] == "" || f[2] != "Running" {
			t.Fatalf("pod %q is not scheduled and Running", p)
		}
		nodeOf[f[0]] = f[1]
	}
	claims := ex.rows(t, []string{"pvc"}, `{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`)
	if len(claims) != 3 {
		t.Fatalf("%d claims, want one per etcd member: %q", len(claims), claims)
	}
	for _, c := range claims {
		if !strings.HasSuffix(c, " Bound") {
			t.Errorf("claim %s is not Bound", c)
		}
	}
	budgets := ex.rows(t, []string{"pdb"}, `{range .items[*]}{.metadata.name} {.status.currentHealthy}/{.status.expectedPods} {.status.disruptionsAllowed}{"\n"}{end}`)
	want := map[string]bool{"2/2 1": false, "3/3 1": false}
	for _, b := range budgets {
		f := strings.Fields(b)
		if len(f) == 3 {
			if _, ok := want[f[1]+" "+f[2]]; ok {
				want[f[1]+" "+f[2]] = true
			}
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("no PodDisruptionBudget counts %s healthy/expected and allows 1 disruption; they are:\n%s", w, strings.Join(budgets, "\n"))
		}
	}
	etcdPods := ex.rows(t, []string{"pods", "-l", "app.kubernetes.io/component=etcd"}, `{range .items[*]}{.metadata.name}{"\n"}{end}`)
	if len(etcdPods) != 3 {
		t.Fatalf("etcd members %q, want 3 (is app.kubernetes.io/component=etcd their label?)", etcdPods)
	}
	first, second := etcdPods[0], etcdPods[1]

	// A drain of one member's node evicts it: one pod per budget.
	if out, errOut, err := suite.Kubectl(ctx, "drain", nodeOf[first], "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s%s", nodeOf[first], err, out, errOut)
	}
	ex.until(t, []string{"pod", first}, "{.status.phase}", "Pending")
	ex.waitFor(t, "the etcd budget to allow no more disruptions", func() (bool, error) {
		rows := ex.rows(t, []string{"pdb"}, `{range .items[*]}{.status.expectedPods} {.status.disruptionsAllowed}{"\n"}{end}`)
		for _, r := range rows {
			if r == "3 0" {
				return true, nil
			}
		}
		return false, fmt.Errorf("budgets: %q", rows)
	})

	// The second member's node: the budget refuses its eviction.
	out, errOut, err := suite.Kubectl(ctx, "drain", nodeOf[second], "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s")
	if err == nil {
		t.Fatalf("kubectl drain %s succeeded with a member already down:\n%s", nodeOf[second], out)
	}
	if !strings.Contains(errOut+out, "disruption budget") {
		t.Errorf("kubectl drain %s failed, but not for the budget: %v\n%s%s", nodeOf[second], err, out, errOut)
	}
	if phase, err := ex.jsonpath([]string{"pod", second}, "{.spec.nodeName} {.status.phase}"); err != nil || phase != nodeOf[second]+" Running" {
		t.Errorf("etcd member %s after the refused drain: %q (%v), want it Running on %s", second, phase, err, nodeOf[second])
	}

	// Back in service: the evicted member returns.
	for _, n := range []string{nodeOf[first], nodeOf[second]} {
		ex.kubectl(t, "uncordon", n)
	}
	ex.until(t, []string{"pod", first}, "{.status.phase}", "Running")
}

// rows answers `kubectl get <what> -o jsonpath=<path>` as lines, failing
// the test if kubectl fails.
func (ex *example) rows(t *testing.T, what []string, path string) []string {
	t.Helper()
	out, err := ex.jsonpath(what, path)
	if err != nil {
		t.Fatalf("kubectl get %s: %v", strings.Join(what, " "), err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
