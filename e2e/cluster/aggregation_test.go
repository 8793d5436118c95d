package cluster

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

func compositeControllerYAML(name, parentResource string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource:
    apiVersion: example.com/v1
    resource: %s
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: http://%s-hook.default/sync
`, name, parentResource, name)
}

func kubectlStdin(t *testing.T, kubeconfig, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return suite.KubectlAs(context.Background(), kubeconfig, strings.NewReader(stdin), args...)
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := suite.Kubectl(context.Background(), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func TestAPIResourcesListsCompositeControllersWithShortNames(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	out := mustKubectl(t, "api-resources", "--api-group=metacontroller.k8s.io")
	if !strings.Contains(out, "compositecontrollers") || !strings.Contains(out, "cc,cctl") {
		t.Fatalf("api-resources does not list compositecontrollers with short names cc,cctl:\n%s", out)
	}
}

func TestDiscoveryThroughKubeAPIServer(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	out := mustKubectl(t, "get", "--raw", "/apis/metacontroller.k8s.io/v1alpha1")
	for _, want := range []string{`"compositecontrollers"`, `"compositecontrollers/status"`, `"compositecontrollers/sync"`, `"compositecontrollers/preview"`, `"cctl"`} {
		if !strings.Contains(out, want) {
			t.Errorf("discovery of metacontroller.k8s.io/v1alpha1 lacks %s:\n%s", want, out)
		}
	}
}

func TestKubectlManagesCompositeControllersThroughKubeAPIServer(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	const name = "agg-crud"

	// Watch from the start, as a user would in another terminal.
	watchCtx, cancelWatch := context.WithTimeout(ctx, time.Minute)
	defer cancelWatch()
	watch := exec.CommandContext(watchCtx, suite.Bin.Kubectl, "get", "cc", "--watch", "--output-watch-events", "--no-headers")
	watch.Env = append(watch.Environ(), "KUBECONFIG="+suite.AdminKubeconfig)
	watchOut, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancelWatch(); _ = watch.Wait() }()
	events := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(watchOut)
		for s.Scan() {
			events <- s.Text()
		}
		close(events)
	}()

	if _, stderr, err := kubectlStdin(t, suite.AdminKubeconfig, compositeControllerYAML(name, "crudparents"), "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create: %v: %s", err, stderr)
	}
	out := mustKubectl(t, "get", "cc", name)
	for _, want := range []string{"PARENT", "SYNC HOOK", "READY", "example.com/v1/crudparents", "configmaps", "http://agg-crud-hook.default/sync"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get cc lacks %q:\n%s", want, out)
		}
	}

	// Server-side apply through the aggregator: a change bumps the generation.
	changed := strings.Replace(compositeControllerYAML(name, "crudparents"), "method: InPlace", "method: Recreate", 1)
	if _, stderr, err := kubectlStdin(t, suite.AdminKubeconfig, changed, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply --server-side: %v: %s", err, stderr)
	}
	if gen := mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.metadata.generation}"); gen != "2" {
		t.Errorf("generation after a server-side apply changing the spec = %q, want 2", gen)
	}

	explain := mustKubectl(t, "explain", "cc.spec.hooks.sync.webhook")
	if !strings.Contains(explain, "exactly one of url and") && !strings.Contains(explain, "url") {
		t.Errorf("kubectl explain does not document the webhook:\n%s", explain)
	}

	mustKubectl(t, "delete", "cc", name)
	if _, stderr, err := suite.Kubectl(ctx, "get", "cc", name); err == nil || !strings.Contains(stderr, "NotFound") {
		t.Errorf("after delete, get says %v: %s", err, stderr)
	}

	// The watch saw the whole life of the object.
	want := []string{"ADDED " + name, "MODIFIED " + name, "DELETED " + name}
	deadline := time.After(30 * time.Second)
	var seen []string
	for len(want) > 0 {
		select {
		case line, ok := <-events:
			if !ok {
				t.Fatalf("watch ended before seeing %v; it printed %q", want, seen)
			}
			seen = append(seen, line)
			if f := strings.Fields(line); len(f) > 1 && f[0]+" "+f[1] == want[0] {
				want = want[1:]
			}
		case <-deadline:
			t.Fatalf("watch did not see %v; it printed %q", want, seen)
		}
	}
}

func TestAuthorizationIsDelegatedToKubeAPIServer(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	nobody, err := suite.UserKubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	reader, err := suite.UserKubeconfig("reader")
	if err != nil {
		t.Fatal(err)
	}
	// The binding exists before the reader's first request, so no cached
	// denial is in the way.
	grantRules(t, "e2e-cc-reader", "reader", rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, Verbs: []string{"get", "list"}})

	for _, tc := range []struct {
		user, kubeconfig string
		args             []string
		stdin            string
		allowed          bool
	}{
		{user: "nobody", kubeconfig: nobody, args: []string{"get", "cc"}},
		{user: "nobody", kubeconfig: nobody, args: []string{"create", "-f", "-"}, stdin: compositeControllerYAML("agg-by-nobody", "nobodyparents")},
		{user: "reader", kubeconfig: reader, args: []string{"get", "cc"}, allowed: true},
		{user: "reader", kubeconfig: reader, args: []string{"create", "-f", "-"}, stdin: compositeControllerYAML("agg-by-reader", "readerparents")},
	} {
		_, stderr, err := kubectlStdin(t, tc.kubeconfig, tc.stdin, tc.args...)
		switch {
		case tc.allowed && err != nil:
			t.Errorf("%s: kubectl %v was refused: %s", tc.user, tc.args, stderr)
		case !tc.allowed && (err == nil || !strings.Contains(stderr, "Forbidden")):
			t.Errorf("%s: kubectl %v: want Forbidden, got err=%v stderr=%s", tc.user, tc.args, err, stderr)
		}
	}
	for _, name := range []string{"agg-by-nobody", "agg-by-reader"} {
		if _, stderr, err := suite.Kubectl(ctx, "get", "cc", name); err == nil || !strings.Contains(stderr, "NotFound") {
			t.Errorf("a refused create left %s behind (err=%v, %s)", name, err, stderr)
		}
	}
}

// TestIdentityHeadersCannotBeForged sends requests straight to
// composite-apiserver, claiming to be an administrator through the
// front-proxy headers without the aggregator's client certificate.
func TestIdentityHeadersCannotBeForged(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	dir := t.TempDir()
	otherCerts, err := framework.NewCerts(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Signed by a CA nobody trusts, with the right name.
	wrongCA, err := otherCerts.Issue(otherCerts.FrontProxyCA, framework.FrontProxyClientName, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	// Signed by the right CA, with a name not on the allowed list.
	wrongName, err := suite.Certs.Issue(suite.Certs.FrontProxyCA, "not-the-front-proxy", nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	const name = "agg-forged"
	body := `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"` + name + `"},
	  "spec":{"parentResource":{"apiVersion":"example.com/v1","resource":"forged"},"hooks":{"sync":{"webhook":{"url":"http://x.default/sync"}}}}}`

	for _, tc := range []struct {
		name string
		cert *framework.CertKey
	}{
		{"no client certificate", nil},
		{"client certificate from another CA", &wrongCA},
		{"front-proxy certificate with a name not allowed", &wrongName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, err := suite.CompositeHTTPClient(tc.cert)
			if err != nil {
				t.Fatal(err)
			}
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				var reqBody io.Reader
				if method == http.MethodPost {
					reqBody = strings.NewReader(body)
				}
				req, _ := http.NewRequestWithContext(ctx, method, suite.CompositeURL()+"/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers", reqBody)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Remote-User", "admin")
				req.Header.Set("X-Remote-Group", "system:masters")
				resp, err := client.Do(req)
				if err != nil {
					// Refusing the TLS handshake is a rejection too.
					t.Logf("%s: refused at the connection: %v", method, err)
					continue
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s with forged headers: status %d, want 401 or 403: %s", method, resp.StatusCode, data)
				}
			}
		})
	}
	if _, stderr, err := suite.Kubectl(ctx, "get", "cc", name); err == nil || !strings.Contains(stderr, "NotFound") {
		t.Errorf("a forged request created %s (err=%v, %s)", name, err, stderr)
	}
}

func TestDeployManifestsAreValidAgainstKubeAPIServer(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	deployDir := filepath.Join(root, "artifacts", "deploy")
	var out string
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "deployment.yaml"} {
		out += mustKubectl(t, "apply", "--dry-run=server", "-f", filepath.Join(deployDir, f))
	}
	// The stack's Service is an ExternalName one (loopback has no
	// endpoints): replacing it proves the deploy's Service valid without
	// merging two unrelated port lists.
	out += mustKubectl(t, "replace", "--dry-run=server", "-f", filepath.Join(deployDir, "service.yaml"))
	for _, want := range []string{
		"namespace/composite-system", "serviceaccount/composite-apiserver",
		"clusterrolebinding.rbac.authorization.k8s.io/composite-apiserver:system:auth-delegator",
		"rolebinding.rbac.authorization.k8s.io/composite-apiserver:extension-apiserver-authentication-reader",
		"service/composite-apiserver", "deployment.apps/composite-apiserver",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply --dry-run=server did not report %s:\n%s", want, out)
		}
	}
	// `kubectl apply -k artifacts/deploy` applies all of them: the
	// kustomization renders every manifest above.
	rendered := mustKubectl(t, "kustomize", deployDir)
	for _, want := range []string{
		"kind: Namespace", "kind: ServiceAccount", "name: composite-apiserver:system:auth-delegator",
		"name: composite-apiserver:extension-apiserver-authentication-reader", "kind: Service\n", "kind: Deployment",
		"metacontroller.k8s.io/aggregate-to-composite-apiserver",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("kubectl kustomize artifacts/deploy lacks %q:\n%s", want, rendered)
		}
	}
	// No APIService is shipped: a ready replica registers it
	// (TestAReadyReplicaRegistersTheAPIServiceAndUninstallRemovesIt).
	if strings.Contains(rendered, "kind: APIService") {
		t.Errorf("kubectl kustomize artifacts/deploy renders an APIService, registered whether or not a replica is ready:\n%s", rendered)
	}
	// The Deployment runs two replicas with probes on /readyz and on /livez
	// without etcd (TestEtcdOutageMakesReplicasUnreadyNotRestarted).
	deploy := mustKubectl(t, "apply", "--dry-run=server", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].readinessProbe.httpGet.path} {.spec.template.spec.containers[0].livenessProbe.httpGet.path}",
		"-f", filepath.Join(root, "artifacts", "deploy", "deployment.yaml"))
	if deploy != "2 /readyz /livez?exclude=etcd" {
		t.Errorf("deployment replicas and probes = %q, want \"2 /readyz /livez?exclude=etcd\"", deploy)
	}
}
