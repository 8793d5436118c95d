package install

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHelmUpgradeRefusesToChangeTheEtcdMemberCount installs the chart with
// its bundled etcd with the real helm, then upgrades it: with another
// etcd.bundled.replicas the upgrade fails, saying why and what to do, and
// the StatefulSet keeps its members; with the same count (and another
// value changed) it goes through. There is no kubelet here: the members
// never run, the objects are what is checked (and no replica registers
// the APIService: the stack's stays in place).
func TestHelmUpgradeRefusesToChangeTheEtcdMemberCount(t *testing.T) {
	suite.DumpLogsOnFailure(t)
	ctx := context.Background()
	const release, namespace, fullname = "members", "members-system", "members-apiserver"
	chart := chartDir(t)
	t.Cleanup(func() {
		if out, err := uninstall(release, namespace); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
	// Its own names: the stack's server identity holds the chart's default
	// ones.
	mustHelm(t, "install", release, chart, "--namespace", namespace, "--create-namespace",
		"--set", "fullnameOverride="+fullname, "--set", "etcd.bundled.replicas=3")

	out, err := helm("upgrade", release, chart, "--namespace", namespace, "--reuse-values", "--set", "etcd.bundled.replicas=5")
	if err == nil {
		t.Fatalf("helm upgrade from 3 etcd members to 5 went through:\n%s", out)
	}
	for _, want := range []string{
		"etcd.bundled.replicas=5, but the installed etcd " + namespace + "/" + fullname + "-etcd has 3 members",
		"--initial-cluster", "Changing the member count",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("helm upgrade to 5 members failed without saying %q: %v", want, err)
		}
	}
	t.Logf("helm upgrade to 5 members: %v", err)
	sts, err := suite.Kube.AppsV1().StatefulSets(namespace).Get(ctx, fullname+"-etcd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 3 {
		t.Errorf("after the refused upgrade the StatefulSet has %d replicas", *sts.Spec.Replicas)
	}

	// The same count upgrades: the refusal is about the count, not any
	// upgrade.
	if out, err := helm("upgrade", release, chart, "--namespace", namespace, "--reuse-values", "--set", "replicas=3"); err != nil {
		t.Fatalf("helm upgrade keeping 3 etcd members: %v\n%s", err, out)
	}
	deploy, err := suite.Kube.AppsV1().Deployments(namespace).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *deploy.Spec.Replicas != 3 {
		t.Errorf("the upgrade keeping the etcd members did not apply: the Deployment has %d replicas", *deploy.Spec.Replicas)
	}
}
