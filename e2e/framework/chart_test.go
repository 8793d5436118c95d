package framework

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// These tests run in every `go test ./...`, without a stack: helm lint and
// helm template with the pinned helm, and what the rendered objects promise.
// e2e/cluster applies them to kube-apiserver (server-side dry run) and
// e2e/loop runs the rendered Deployment's arguments.

const chartNamespace = "composite-system"

func TestChartLintsInEveryMode(t *testing.T) {
	dir, err := ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	modes, err := ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	if len(modes) < 5 {
		t.Errorf("the chart has %d modes (%v), want default and ci/*-values.yaml for external etcd, development RBAC, cert-manager", len(modes), modes)
	}
	for mode, values := range modes {
		t.Run(mode, func(t *testing.T) {
			args := []string{"lint", "--strict", dir, "--namespace", chartNamespace}
			if values != "" {
				args = append(args, "--values", values)
			}
			if out, err := Helm(args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			rendered, err := RenderChart(chartNamespace, values)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := SplitManifests(rendered)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.Name == "" {
					t.Errorf("a %s without a name", o.Kind)
				}
			}
		})
	}
}

// Values that would make an install unsafe are refused at render time, not
// discovered in the cluster.
func TestChartRefusesUnsafeValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"replicas without leader election", []string{"replicas=3", "leaderElection.enabled=false"}, "every replica would run the controller loop"},
		{"external etcd without servers", []string{"etcd.mode=external"}, "needs etcd.external.servers"},
		{"unknown etcd mode", []string{"etcd.mode=embedded"}, "etcd.mode must be bundled or external"},
		{"unknown RBAC mode", []string{"rbac.mode=admin"}, "rbac.mode must be perController or development"},
		{"a grace period the shutdown delay outlasts", []string{"shutdown.terminationGracePeriodSeconds=20"}, "must exceed shutdown.delaySeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderChart(chartNamespace, "", tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendering with %v: %v, want an error saying %q", tc.set, err, tc.want)
			}
		})
	}
	// One replica may run without leader election (a development install).
	if _, err := RenderChart(chartNamespace, "", "replicas=1", "leaderElection.enabled=false"); err != nil {
		t.Errorf("one replica without leader election: %v", err)
	}
}

// In every mode with more than one replica, the rendered Deployment's
// arguments, read by the server's own command line, turn leader election
// or shards on in the release's namespace, and the rendered RBAC lets the
// server's service account hold the Leases there.
func TestChartDeploymentElectsALeaderItMayHold(t *testing.T) {
	modes, err := ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	for mode, values := range modes {
		t.Run(mode, func(t *testing.T) {
			const ns = "some-namespace"
			rendered, err := RenderChart(ns, values)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ChartDeployment(ns, values)
			if err != nil {
				t.Fatal(err)
			}
			o, err := DeploymentOptions(d)
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas > 1 && !o.LeaderElect && o.Shards == 0 {
				t.Fatalf("%d replicas without --leader-elect or --shards", *d.Spec.Replicas)
			}
			if !o.LeaderElect && o.Shards == 0 {
				return
			}
			if o.LeaderElection.Namespace != ns {
				t.Errorf("the Lease is in namespace %q, the release in %q", o.LeaderElection.Namespace, ns)
			}
			sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: ns}
			if !mayHoldLeases(t, rendered, sa, ns) {
				t.Errorf("the chart's RBAC does not let %s/%s get, create and update Leases in %s", ns, sa.Name, ns)
			}
		})
	}
}

// The chart grants the server what artifacts/deploy/rbac.yaml grants,
// rule for rule: two copies of one decision drift unless held together.
func TestChartGrantsWhatTheKustomizeManifestsGrant(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "artifacts", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := rbacObjects(t, string(data))
	rendered, err := RenderChart(chartNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	chart := rbacObjects(t, rendered)
	if !reflect.DeepEqual(keys(shipped), keys(chart)) {
		t.Errorf("RBAC objects differ:\n artifacts/deploy: %v\n chart:            %v", keys(shipped), keys(chart))
	}
	for k, want := range shipped {
		if got, ok := chart[k]; ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs:\n artifacts/deploy: %+v\n chart:            %+v", k, want, got)
		}
	}

	// Development mode adds all rights and nothing else.
	dev, err := RenderChart(chartNamespace, "", "rbac.mode=development")
	if err != nil {
		t.Fatal(err)
	}
	devObjs := rbacObjects(t, dev)
	var added []string
	for k := range devObjs {
		if _, ok := chart[k]; !ok {
			added = append(added, k)
		}
	}
	if len(added) != 1 || !strings.Contains(devObjs[added[0]], "cluster-admin") {
		t.Errorf("development mode adds %v, want one binding to cluster-admin", added)
	}
}

// rbacObjects are the RBAC objects among manifests, by kind/namespace/name,
// as their rules, role references and subjects without labels.
func rbacObjects(t *testing.T, manifests string) map[string]string {
	t.Helper()
	objs, err := SplitManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		var body struct {
			Rules           []rbacv1.PolicyRule     `json:"rules"`
			RoleRef         *rbacv1.RoleRef         `json:"roleRef"`
			Subjects        []rbacv1.Subject        `json:"subjects"`
			AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
		}
		switch o.Kind {
		case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		default:
			continue
		}
		if o.Name == "composite-apiserver-metrics-reader" {
			continue
		}
		if err := yaml.Unmarshal([]byte(o.YAML), &body); err != nil {
			t.Fatal(err)
		}
		out[o.Kind+"/"+o.Namespace+"/"+o.Name] = fmt.Sprintf("%+v", body)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Without cert-manager the chart's bootstrap certificates work together:
// the CA the server registers as the APIService's caBundle
// (--apiservice-ca-file) verifies the serving certificate for the
// Service's name (what kube-apiserver's aggregator checks), etcd's
// certificate is valid for every member's name on both ends, and the
// server's client certificate is one etcd trusts. With cert-manager, that
// CA file is the serving Certificate's ca.crt.
func TestChartCertificatesChainForTheNamesTheyAreUsedFor(t *testing.T) {
	rendered, err := RenderChart(chartNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]corev1.Secret{}
	for _, o := range objs {
		if o.Kind == "Secret" {
			var s corev1.Secret
			if err := yaml.UnmarshalStrict([]byte(o.YAML), &s); err != nil {
				t.Fatal(err)
			}
			secrets[s.Name] = s
		}
	}
	caSecret, caKey := apiServiceCAFile(t, objs)
	serving := secrets["composite-apiserver-serving-cert"]
	verify(t, "the serving certificate", secrets[caSecret].Data[caKey], serving.Data["tls.crt"], x509.ExtKeyUsageServerAuth,
		"composite-apiserver."+chartNamespace+".svc")

	etcdServer, etcdClient := secrets["composite-apiserver-etcd-server"], secrets["composite-apiserver-etcd-client"]
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("composite-apiserver-etcd-%d.composite-apiserver-etcd.%s.svc", i, chartNamespace)
		verify(t, "etcd's certificate (client port)", etcdClient.Data["ca.crt"], etcdServer.Data["tls.crt"], x509.ExtKeyUsageServerAuth, name)
		verify(t, "etcd's certificate (as a peer client)", etcdServer.Data["ca.crt"], etcdServer.Data["tls.crt"], x509.ExtKeyUsageClientAuth, "")
	}
	verify(t, "the server's etcd client certificate", etcdServer.Data["ca.crt"], etcdClient.Data["tls.crt"], x509.ExtKeyUsageClientAuth, "")

	modes, err := ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	withCertManager, err := RenderChart(chartNamespace, modes["cert-manager"])
	if err != nil {
		t.Fatal(err)
	}
	cmObjs, err := SplitManifests(withCertManager)
	if err != nil {
		t.Fatal(err)
	}
	certificates := map[string]bool{}
	for _, o := range cmObjs {
		if o.Kind == "Certificate" {
			certificates[o.Namespace+"/"+o.Name] = true
		}
		if o.Kind == "Secret" {
			t.Errorf("with cert-manager the chart still renders Secret %s: cert-manager's would be overwritten", o.Name)
		}
	}
	// cert-manager names each Certificate's Secret as the Certificate,
	// and puts the issuing CA in its ca.crt.
	if caSecret, caKey := apiServiceCAFile(t, cmObjs); !certificates[chartNamespace+"/"+caSecret] || caKey != "ca.crt" {
		t.Errorf("the APIService's CA is %s of Secret %s; the chart's Certificates are %v", caKey, caSecret, certificates)
	}
}

// apiServiceCAFile is the Secret and key the rendered Deployment's
// --apiservice-ca-file reads, through the volume mounted there.
func apiServiceCAFile(t *testing.T, objs []Object) (secret, key string) {
	t.Helper()
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		d, err := decodeDeployment(o.Name, []byte(o.YAML))
		if err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		var file string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--apiservice-ca-file="); ok {
				file = v
			}
		}
		for _, m := range c.VolumeMounts {
			dir := strings.TrimSuffix(m.MountPath, "/") + "/"
			if !strings.HasPrefix(file, dir) {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					return v.Secret.SecretName, strings.TrimPrefix(file, dir)
				}
			}
		}
		t.Fatalf("the Deployment's --apiservice-ca-file %q is in no Secret it mounts", file)
	}
	t.Fatal("the chart renders no Deployment")
	return "", ""
}

// verify checks that certPEM chains to caPEM for usage and, when dnsName is
// given, is valid for it.
func verify(t *testing.T, what string, caPEM, certPEM []byte, usage x509.ExtKeyUsage, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Errorf("%s: no CA certificate to verify against", what)
		return
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Errorf("%s: no PEM certificate (%q)", what, base64.StdEncoding.EncodeToString(certPEM[:min(len(certPEM), 32)]))
		return
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("%s does not verify for %q (%v): %v", what, dnsName, usage, err)
	}
}

// The server may impersonate ServiceAccounts only, and only in the
// namespaces the operator lists: none by default; with identity values, a
// Role in each listed namespace, and the lockdown flags on the server.
func TestChartImpersonatesServiceAccountsOnlyWhereListed(t *testing.T) {
	plain, err := RenderChart(chartNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "impersonate") {
		t.Errorf("the default chart grants impersonation:\n%s", plain)
	}
	modes, err := ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := RenderChart(chartNamespace, modes["identity"])
	if err != nil {
		t.Fatal(err)
	}
	objs, err := SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, o := range objs {
		if o.Kind != "Role" && o.Kind != "ClusterRole" {
			continue
		}
		var role rbacv1.Role
		if err := yaml.Unmarshal([]byte(o.YAML), &role); err != nil {
			t.Fatal(err)
		}
		impersonates := false
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "impersonate") || slices.Contains(r.Verbs, "*") {
				impersonates = true
				if len(r.Resources) != 1 || r.Resources[0] != "serviceaccounts" {
					t.Errorf("%s %s: impersonation of %v, want serviceaccounts only", o.Kind, o.Name, r.Resources)
				}
			}
		}
		if !impersonates {
			continue
		}
		if o.Kind != "Role" {
			t.Errorf("impersonation granted by ClusterRole %s, want namespaced Roles only", o.Name)
		}
		roles = append(roles, role.Namespace+"/"+role.Name)
	}
	if len(roles) != 1 || !strings.HasPrefix(roles[0], "default/") {
		t.Errorf("impersonating Roles %v, want one in the listed namespace default", roles)
	}
	for _, flag := range []string{"--require-controller-service-account", "--default-controller-service-account=default/composite-controllers"} {
		if !strings.Contains(rendered, flag) {
			t.Errorf("the identity mode does not run the server with %s", flag)
		}
	}
}
