package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestHelmAdoptsAKustomizeInstallAndUninstallsInOrder follows
// artifacts/deploy/README.md on a real kube-apiserver with the real helm:
// an install made with `kubectl apply -k artifacts/deploy` (its serving
// Secret made by the admin) is moved to the chart (the objects labelled
// and annotated as the release's, the Deployment deleted with its pods
// orphaned, helm install with an external etcd), which keeps the serving
// certificate, whose CA the server registers as the APIService's caBundle
// (--apiservice-ca-file); then `helm uninstall` removes every object it
// installed, and namespace deletion is not left waiting on our group.
// There is no kubelet here: the Deployment's pods never run, so neither
// install has an APIService (no replica is ready to register it); the
// objects are what is checked.
func TestHelmAdoptsAKustomizeInstallAndUninstallsInOrder(t *testing.T) {
	suite.DumpLogsOnFailure(t)
	ctx := context.Background()
	// The aggregation breaks on purpose from here on (the kustomize
	// install's Service has no endpoints on loopback):
	// kube-controller-manager's complaints about our group are expected.
	suite.Disrupted()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		var in *strings.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		var out, errOut string
		if in != nil {
			out, errOut, err = suite.KubectlAs(ctx, suite.AdminKubeconfig, in, args...)
		} else {
			out, errOut, err = suite.Kubectl(ctx, args...)
		}
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		return out
	}

	// Today's install: artifacts/deploy, and the serving Secret its
	// Deployment mounts (the stack's Service, an ExternalName one, makes
	// way for the shipped one).
	kubectl("", "-n", framework.CompositeNamespace, "delete", "service", framework.CompositeService)
	kubectl("", "delete", "apiservice", framework.APIServiceName)
	kubectl("", "apply", "-k", filepath.Join(root, "artifacts", "deploy"))
	ca, err := os.ReadFile(suite.Certs.ServingCA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	kubectl("", "-n", framework.CompositeNamespace, "create", "secret", "generic", "composite-apiserver-serving-cert",
		"--type=kubernetes.io/tls", "--from-file=tls.crt="+suite.Certs.CompositeServing.CertFile,
		"--from-file=tls.key="+suite.Certs.CompositeServing.KeyFile, "--from-file=ca.crt="+suite.Certs.ServingCA.CertFile)

	// The move, as the README says.
	manifests := kubectl("", "kustomize", filepath.Join(root, "artifacts", "deploy"))
	kubectl(manifests, "label", "-f", "-", "--overwrite", "app.kubernetes.io/managed-by=Helm")
	kubectl(manifests, "annotate", "-f", "-", "--overwrite",
		"meta.helm.sh/release-name=composite-apiserver", "meta.helm.sh/release-namespace="+framework.CompositeNamespace)
	kubectl("", "-n", framework.CompositeNamespace, "label", "secret", "composite-apiserver-serving-cert", "--overwrite", "app.kubernetes.io/managed-by=Helm")
	kubectl("", "-n", framework.CompositeNamespace, "annotate", "secret", "composite-apiserver-serving-cert", "--overwrite",
		"meta.helm.sh/release-name=composite-apiserver", "meta.helm.sh/release-namespace="+framework.CompositeNamespace)
	kubectl("", "-n", framework.CompositeNamespace, "delete", "deployment", "composite-apiserver", "--cascade=orphan")
	mustHelm(t, "install", "composite-apiserver", chartDir(t), "--namespace", framework.CompositeNamespace,
		"--set", "etcd.mode=external", "--set", "etcd.external.servers={"+suite.EtcdURL+"}",
		"--set", "etcd.prefix="+framework.CompositeEtcdPrefix)
	if status := mustHelm(t, "status", "composite-apiserver", "-n", framework.CompositeNamespace, "-o", "json"); !strings.Contains(status, `"status":"deployed"`) {
		t.Fatalf("helm status: %s", status)
	}

	// The serving certificate was kept, with the CA the server registers.
	if _, err := suite.Aggregator.ApiregistrationV1().APIServices().Get(ctx, framework.APIServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("with no replica ready, the APIService: %v (want NotFound)", err)
	}
	secret, err := suite.Kube.CoreV1().Secrets(framework.CompositeNamespace).Get(ctx, "composite-apiserver-serving-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := os.ReadFile(suite.Certs.CompositeServing.CertFile)
	if !bytes.Equal(secret.Data["tls.crt"], cert) || !bytes.Equal(secret.Data["ca.crt"], ca) {
		t.Errorf("helm install replaced the serving certificate or its CA")
	}
	deploy, err := suite.Kube.AppsV1().Deployments(framework.CompositeNamespace).Get(ctx, "composite-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if deploy.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" || deploy.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the Deployment is not the chart's: priority %q, labels %v", deploy.Spec.Template.Spec.PriorityClassName, deploy.Labels)
	}
	if args := strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--apiservice-ca-file=/var/run/serving-cert/ca.crt") {
		t.Errorf("the chart's server does not register the kept Secret's CA: %s", args)
	}

	// Uninstall: helm deletes every object it installed.
	mustHelm(t, "uninstall", "composite-apiserver", "-n", framework.CompositeNamespace, "--wait", "--timeout=60s")
	if _, err := suite.Aggregator.ApiregistrationV1().APIServices().Get(ctx, framework.APIServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the APIService after helm uninstall: %v", err)
	}
	left := kubectl("", "get", "deployment,service,serviceaccount,secret,role,rolebinding", "-n", framework.CompositeNamespace,
		"-l", "app.kubernetes.io/managed-by=Helm", "-o", "name")
	left += kubectl("", "get", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name")
	if strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left:\n%s", left)
	}

	// Namespaces are deleted as usual.
	took, err := suite.TimeNamespaceDeletion(ctx, "after-uninstall", 60*time.Second)
	if err != nil {
		t.Fatalf("after helm uninstall: %v", err)
	}
	t.Logf("after helm uninstall a namespace was deleted in %s", took.Round(100*time.Millisecond))
}
