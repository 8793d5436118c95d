package install

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestAReadyReplicaRegistersTheAPIServiceAndUninstallRemovesIt installs the
// chart with helm: no APIService appears while no replica is ready. A
// replica then runs from the installed Deployment's arguments, as the
// release's ServiceAccount (the chart's RBAC, nothing more): once ready it
// registers the APIService itself, owned by the release's
// ClusterRoleBinding; the APIService becomes Available and `kubectl get
// compositecontrollers` is served through kube-apiserver. `helm uninstall`
// then takes the APIService with it (the garbage collector, once the
// ClusterRoleBinding is gone), and with the replica stopped, as the pods of
// an uninstalled release are, namespaces are deleted as usual.
//
// Where the replica runs is the stack's: its etcd, port and serving
// certificate, and the stack's ExternalName Service in front of it, so the
// APIService names that Service, the replica's port and the stack's CA
// (the chart's own CA file is checked by
// TestChartCertificatesChainForTheNamesTheyAreUsedFor).
func TestAReadyReplicaRegistersTheAPIServiceAndUninstallRemovesIt(t *testing.T) {
	suite.DumpLogsOnFailure(t)
	ctx := context.Background()
	apiServices := suite.Aggregator.ApiregistrationV1().APIServices()
	const release, namespace, fullname = "selfreg", "selfreg-system", "selfreg-apiserver"

	// The stack's server and registration make way for the release's.
	suite.Disrupted()
	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	if err := apiServices.Delete(ctx, framework.APIServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = uninstall(release, namespace)
		if err := suite.StopComposite(); err != nil {
			t.Error(err)
		}
		if err := apiServices.Delete(ctx, framework.APIServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
		if err := suite.StartComposite(ctx); err != nil {
			t.Fatalf("can't start the stack's composite-apiserver again: %v", err)
		}
		if err := suite.RegisterAPIService(ctx); err != nil {
			t.Fatalf("can't register the stack's APIService again: %v", err)
		}
	})

	mustHelm(t, "install", release, chartDir(t), "--namespace", namespace, "--create-namespace",
		"--set", "image.repository=registry.invalid/composite-apiserver", "--set", "image.tag=never-pulled",
		"--set", "fullnameOverride="+fullname,
		"--set", "etcd.mode=external", "--set", "etcd.external.servers={"+suite.EtcdURL+"}")
	if _, err := apiServices.Get(ctx, framework.APIServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("with no replica ready, the APIService: %v (want NotFound)", err)
	}

	identity, err := suite.ServiceAccountKubeconfig(ctx, namespace, fullname)
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.StartComposite(ctx, replicaArgs(t, namespace, fullname, identity)...); err != nil {
		t.Fatal(err)
	}
	suite.Disrupted()
	// The README's wait, as a user runs it.
	for _, wait := range []string{"--for=create", "--for=condition=Available"} {
		if out, stderr, err := suite.Kubectl(ctx, "wait", wait, "apiservice/"+framework.APIServiceName, "--timeout=100s"); err != nil {
			t.Fatalf("kubectl wait %s: %v\n%s%s", wait, err, out, stderr)
		}
	}
	checkRegistered(t, fullname)
	if err := suite.WaitAuthenticatedRequests(ctx); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := suite.Kubectl(ctx, "get", "compositecontrollers"); err != nil {
		t.Fatalf("kubectl get compositecontrollers through kube-apiserver: %v\n%s%s", err, out, stderr)
	}

	// Uninstall: the release's objects go, and the APIService with its
	// owner; then the replica, as the Deployment's pods would.
	if out, err := uninstall(release, namespace); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Generous: the garbage collector acts within seconds of the owner's
	// deletion when the machine is idle.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := apiServices.Get(ctx, framework.APIServiceName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the APIService outlived helm uninstall: %v", err)
	}
	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	took, err := suite.TimeNamespaceDeletion(ctx, "after-selfreg-uninstall", 2*time.Minute)
	if err != nil {
		t.Fatalf("after helm uninstall: %v", err)
	}
	t.Logf("after helm uninstall a namespace was deleted in %s", took.Round(100*time.Millisecond))
}

// replicaArgs are the installed Deployment's arguments, with the stack's
// where it runs (framework.DeploymentServerArgs; StartComposite adds the
// stack's etcd, port and certificate), its APIService flags as installed
// but for the Service and CA, which are the stack's, and the release's
// ServiceAccount as identity.
func replicaArgs(t *testing.T, namespace, fullname, identity string) []string {
	t.Helper()
	d, err := suite.Kube.AppsV1().Deployments(namespace).Get(context.Background(), fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := framework.DeploymentServerArgs(d)
	registers := false
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if a == "--register-apiservice" {
			registers = true
		}
		if strings.HasPrefix(a, "--register-apiservice") || strings.HasPrefix(a, "--apiservice-") {
			args = append(args, a)
		}
	}
	if !registers {
		t.Fatalf("the chart's Deployment does not register the APIService: %q", d.Spec.Template.Spec.Containers[0].Args)
	}
	return append(args,
		"--apiservice-service-namespace="+framework.CompositeNamespace,
		"--apiservice-service-name="+framework.CompositeService,
		"--apiservice-service-port="+strconv.Itoa(suite.CompositePort),
		"--apiservice-ca-file="+suite.Certs.ServingCA.CertFile,
		"--authentication-kubeconfig="+identity, "--authorization-kubeconfig="+identity, "--kubeconfig="+identity)
}

// checkRegistered holds the registered APIService to what the replica was
// told: the stack's Service and CA, owned by the release's
// ClusterRoleBinding.
func checkRegistered(t *testing.T, fullname string) {
	t.Helper()
	ctx := context.Background()
	api, err := suite.Aggregator.ApiregistrationV1().APIServices().Get(ctx, framework.APIServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(suite.Certs.ServingCA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(api.Spec.CABundle, ca) {
		t.Errorf("the APIService's caBundle is not the CA file's:\n%s", api.Spec.CABundle)
	}
	if s := api.Spec.Service; s == nil || s.Namespace != framework.CompositeNamespace || s.Name != framework.CompositeService {
		t.Errorf("the APIService's service: %+v", s)
	}
	binding, err := suite.Kube.RbacV1().ClusterRoleBindings().Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := api.OwnerReferences; len(refs) != 1 || refs[0].Kind != "ClusterRoleBinding" || refs[0].UID != binding.UID {
		t.Errorf("the APIService's owners: %+v, want ClusterRoleBinding %s (%s)", refs, fullname, binding.UID)
	}
}
