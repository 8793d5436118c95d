// Package etcdquorum proves composite-apiserver on the etcd it is installed
// with (artifacts/chart's bundled StatefulSet, artifacts/etcd): three
// members, TLS between them and to the server, keys encrypted at rest. It
// runs the real etcd and the real server binary on 127.0.0.1; no
// kube-apiserver is needed (standalone mode with --etcd-servers).
package etcdquorum

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	versioned "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

const etcdPrefix = "/registry/metacontroller.k8s.io"

// ccKeys is where the server keeps CompositeControllers under etcdPrefix
// (the generic registry's <group>/<resource>).
const ccKeys = etcdPrefix + "/metacontroller.k8s.io/compositecontrollers/"

// member is one etcd of the cluster, restartable with its data.
type member struct {
	name                        string
	clientURL, peerURL, metrics string
	args                        []string
	proc                        *framework.Process
}

// cluster is three etcd members with TLS between them and to clients.
type cluster struct {
	dir     string
	bin     string
	members []*member
	certs   *framework.Certs
	// ca verifies members; client is the certificate the server presents.
	ca     string
	client framework.CertKey
	// tlsDir holds every member's certificate (for both ends) and the CA,
	// named as the chart's Secret names them.
	tlsDir string
	// etcd is the chart's etcd container, which every member runs.
	etcd chartEtcd
}

func newCluster(t *testing.T, bin, dir string) *cluster {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	certs, err := framework.NewCerts(filepath.Join(dir, "certs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, bin: bin, certs: certs, ca: certs.ServingCA.CertFile}
	// Members connect to each other as well as serve: their certificate is
	// for both ends, as the chart's is.
	memberCert, err := certs.Issue(certs.ServingCA, "etcd", nil, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")},
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	if c.client, err = certs.Issue(certs.ServingCA, "composite-apiserver", nil, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatal(err)
	}
	c.etcd = renderChartEtcd(t)
	// The files of the chart's Secret, under its key names.
	c.tlsDir = filepath.Join(dir, "etcd-tls")
	if err := os.MkdirAll(c.tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, from := range map[string]string{"ca.crt": c.ca, "tls.crt": memberCert.CertFile, "tls.key": memberCert.KeyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.tlsDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var initial []string
	for i := 0; i < 3; i++ {
		m := c.newMember(t, fmt.Sprintf("etcd-%d", i))
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		m.args = c.args(t, m, strings.Join(initial, ","), filepath.Join(dir, m.name))
	}
	return c
}

// args are the arguments of the chart's etcd container with the places
// substituted: each member's name, data directory and loopback URLs, and
// the directory of its certificate where the chart mounts its Secret.
// Everything else is the chart's, so that the etcd proven here is the etcd
// installed.
func (c *cluster) args(t *testing.T, m *member, initialCluster, dataDir string) []string {
	t.Helper()
	places := map[string]string{
		"name": m.name, "data-dir": dataDir,
		"listen-client-urls": m.clientURL, "advertise-client-urls": m.clientURL,
		"listen-peer-urls": m.peerURL, "initial-advertise-peer-urls": m.peerURL,
		"initial-cluster": initialCluster, "listen-metrics-urls": m.metrics,
	}
	var out []string
	seen := map[string]bool{}
	for _, arg := range c.etcd.container.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if place, ok := places[name]; ok {
			seen[name] = true
			out = append(out, "--"+name+"="+place)
			continue
		}
		out = append(out, strings.ReplaceAll(arg, c.etcd.tlsMount+"/", c.tlsDir+"/"))
	}
	for name := range places {
		if !seen[name] {
			t.Fatalf("the chart's etcd has no --%s: the test does not know where it runs", name)
		}
	}
	return append(out, "--log-level=warn")
}

// chartEtcd is the etcd container of the chart's StatefulSet (default
// values), where it mounts its certificate, and its probes' paths.
type chartEtcd struct {
	container                   corev1.Container
	tlsMount                    string
	readinessPath, livenessPath string
}

func renderChartEtcd(t *testing.T) chartEtcd {
	t.Helper()
	rendered, err := framework.RenderChart(framework.CompositeNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind != "StatefulSet" {
			continue
		}
		var sts appsv1.StatefulSet
		if err := yaml.UnmarshalStrict([]byte(o.YAML), &sts); err != nil {
			t.Fatal(err)
		}
		e := chartEtcd{container: sts.Spec.Template.Spec.Containers[0]}
		for _, m := range e.container.VolumeMounts {
			if m.Name == "tls" {
				e.tlsMount = strings.TrimSuffix(m.MountPath, "/")
			}
		}
		if e.container.ReadinessProbe == nil || e.container.LivenessProbe == nil || e.tlsMount == "" {
			t.Fatalf("the chart's etcd has no readiness or liveness probe, or no tls volume: %+v", e.container)
		}
		e.readinessPath = e.container.ReadinessProbe.HTTPGet.Path
		e.livenessPath = e.container.LivenessProbe.HTTPGet.Path
		return e
	}
	t.Fatal("the chart renders no etcd StatefulSet")
	return chartEtcd{}
}

func (c *cluster) newMember(t *testing.T, name string) *member {
	return &member{
		name:      name,
		clientURL: "https://127.0.0.1:" + strconv.Itoa(freePort(t)),
		peerURL:   "https://127.0.0.1:" + strconv.Itoa(freePort(t)),
		metrics:   "http://127.0.0.1:" + strconv.Itoa(freePort(t)),
	}
}

func (c *cluster) start(t *testing.T, m *member) {
	t.Helper()
	p, err := framework.StartProcess(m.name, c.dir, c.bin, m.args...)
	if err != nil {
		t.Fatal(err)
	}
	m.proc = p
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
}

// probe answers the status of GET path on m's metrics listener, the one
// the chart's probes use (0 when nothing answers).
func (m *member) probe(path string) int {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(m.metrics + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (m *member) isLeader() bool {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(m.metrics + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "etcd_server_is_leader 1" {
			return true
		}
	}
	return false
}

// startAll starts every member and waits until each is ready.
func (c *cluster) startAll(t *testing.T) {
	t.Helper()
	for _, m := range c.members {
		c.start(t, m)
	}
	c.waitReady(t, c.members...)
}

// findBinaries is framework.FindBinaries, failing t when they are missing.
func findBinaries(t *testing.T) framework.Binaries {
	t.Helper()
	bin, err := framework.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func (c *cluster) waitReady(t *testing.T, members ...*member) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		for _, m := range members {
			if exited, err := m.proc.Exited(); exited {
				return false, fmt.Errorf("%s exited: %v", m.name, err)
			}
			if m.probe(c.etcd.readinessPath) != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, m := range members {
			t.Logf("%s:\n%s", m.name, m.proc.Tail(3000))
		}
		t.Fatalf("etcd members not ready: %v", err)
	}
}

func (c *cluster) leader(t *testing.T) *member {
	t.Helper()
	var leader *member
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, m := range c.members {
			if exited, _ := m.proc.Exited(); !exited && m.isLeader() {
				leader = m
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no etcd leader: %v", err)
	}
	return leader
}

func (c *cluster) etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	tlsConfig, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		CAFile: c.ca, CertFile: c.client.CertFile, KeyFile: c.client.KeyFile,
	}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// result is one create's answer, and the phase it came back in: an answer
// is what a client acts on, whenever the request was sent.
type result struct {
	phase string
	name  string
	uid   types.UID
	err   error
	done  time.Time
}

// load creates CompositeControllers at a steady rate until stopped, each
// create on its own (up to maxInFlight at once), and records each answer
// under the phase current when it came. A steady rate, not a fixed set of
// clients each waiting for its last answer: writes caught in flight by the
// leader's death wait for etcd's request timeout (and get a 500 "etcdserver:
// request timed out"), and they must not keep the writes sent after the
// election from being seen.
type load struct {
	client versioned.Interface
	mu     sync.Mutex
	phase  string
	out    []result
	stop   chan struct{}
	wg     sync.WaitGroup
}

const (
	// 50 creates a second, and room for every one sent during the longest
	// wait etcd imposes (its request timeout, ~7s; a call's, 10s): the
	// ones sent after a new leader is elected must get through even while
	// the ones caught by the election still wait.
	sendEvery   = 20 * time.Millisecond
	maxInFlight = 1000
	// callTimeout is longer than etcd's own request timeout (5s plus two
	// election timeouts), so that the server's answer is seen.
	callTimeout = 10 * time.Second
)

func (l *load) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *load) run() {
	l.stop = make(chan struct{})
	slots := make(chan struct{}, maxInFlight)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(sendEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue // all in flight: skip this tick
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-slots }()
				name := fmt.Sprintf("q-%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				got, err := l.client.MetacontrollerV1alpha1().CompositeControllers().Create(ctx, controller(name), metav1.CreateOptions{})
				r := result{name: name, err: err, done: time.Now()}
				if err == nil {
					r.uid = got.UID
				}
				l.mu.Lock()
				r.phase = l.phase
				l.out = append(l.out, r)
				l.mu.Unlock()
			}()
		}
	}()
}

func (l *load) halt() []result {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]result(nil), l.out...)
}

func controller(name string) *v1alpha1.CompositeController {
	cc := &v1alpha1.CompositeController{}
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(`
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource: {apiVersion: example.com/v1, resource: hellos}
  childResources:
  - apiVersion: v1
    resource: configmaps
  hooks:
    sync:
      webhook: {url: http://hook.example/sync}
`, name)), cc); err != nil {
		panic(err)
	}
	return cc
}

// TestServerOnAThreeMemberEtcdSurvivesOneLossAndFailsSafeOnTwo writes
// CompositeControllers through the server from several clients while etcd
// members die: with the leader gone the API keeps accepting writes; with a
// second member gone (no quorum) every write and every consistent read
// fails (an error or a timeout, never a success); once both are back the
// API serves again and holds every object it acknowledged, with the UID it
// answered. The objects are encrypted in etcd (--encryption-provider-config),
// and a snapshot of one member, restored into a new cluster, serves them all.
func TestServerOnAThreeMemberEtcdSurvivesOneLossAndFailsSafeOnTwo(t *testing.T) {
	bin := findBinaries(t)
	dir := t.TempDir()
	c := newCluster(t, bin.Etcd, dir)
	start := time.Now()
	c.startAll(t)
	t.Logf("3 etcd members ready in %s", time.Since(start).Round(time.Millisecond))

	encryption := filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(encryption, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [compositecontrollers.metacontroller.k8s.io]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
  - identity: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, m := range c.members {
		endpoints = append(endpoints, m.clientURL)
	}
	client, server := startServer(t, bin.CompositeAPIServer, filepath.Join(dir, "server"), c, endpoints, encryption)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("composite-apiserver:\n%s", server.Tail(6000))
			for _, m := range c.members {
				t.Logf("%s:\n%s", m.name, m.proc.Tail(2000))
			}
		}
	})

	l := &load{client: client, phase: "3 members"}
	l.run()
	stopped := false
	defer func() {
		if !stopped {
			l.halt()
		}
	}()
	time.Sleep(3 * time.Second)

	// One member lost: the leader, the harshest, since a new one must be
	// elected while writes are in flight.
	first := c.leader(t)
	l.setPhase("2 members")
	lostAt := time.Now()
	first.proc.Kill()
	// The new leader: from then on etcd takes writes again, and so must
	// the API. How long the election takes is etcd's (about a second
	// unloaded, several on a saturated machine), not the server's.
	second := c.leader(t)
	electedAt := time.Now()
	t.Logf("killed %s (the leader); %s elected %s later", first.name, second.name, electedAt.Sub(lostAt).Round(time.Millisecond))
	time.Sleep(time.Until(lostAt.Add(6 * time.Second)))
	if time.Since(electedAt) < 4*time.Second {
		time.Sleep(time.Until(electedAt.Add(4 * time.Second)))
	}

	// A second member lost: no quorum.
	var survivor *member
	for _, m := range c.members {
		if m != first && m != second {
			survivor = m
		}
	}
	l.setPhase("settling")
	secondLostAt := time.Now()
	second.proc.Kill()
	t.Logf("killed %s (the new leader); %s is alone", second.name, survivor.name)
	// Calls sent before the kill may still be answered by then.
	time.Sleep(1 * time.Second)
	l.setPhase("1 member")
	readErrs := readsWithoutQuorum(t, client)
	// The chart's probes: a member without a quorum is alive (no restart)
	// and not ready.
	if code := survivor.probe(c.etcd.livenessPath); code != http.StatusOK {
		t.Errorf("/livez of %s without a quorum: %d, want 200 (the chart's liveness probe would restart it)", survivor.name, code)
	}
	if code := survivor.probe(c.etcd.readinessPath); code == http.StatusOK {
		t.Errorf("/readyz of %s without a quorum: 200, want a failure", survivor.name)
	}

	// Both back, with their data.
	l.setPhase("restarting")
	restartAt := time.Now()
	c.start(t, first)
	c.start(t, second)
	c.waitReady(t, c.members...)
	t.Logf("quorum back %s after the restart", time.Since(restartAt).Round(time.Millisecond))
	l.setPhase("recovered")
	time.Sleep(3 * time.Second)
	results := l.halt()
	stopped = true

	byPhase := map[string][]result{}
	for _, r := range results {
		byPhase[r.phase] = append(byPhase[r.phase], r)
	}
	for _, phase := range []string{"3 members", "2 members", "settling", "1 member", "restarting", "recovered"} {
		ok, failed := count(byPhase[phase])
		t.Logf("%-10s %5d writes acknowledged, %4d failed%s", phase, ok, failed, describeErrors(byPhase[phase]))
	}

	// With two members the API serves: writes are acknowledged, and
	// after the election every write is.
	ok2, _ := count(byPhase["2 members"])
	if ok2 == 0 {
		t.Errorf("no write was acknowledged with two of three members")
	}
	gap := writeGap(results, lostAt, secondLostAt)
	resumed := firstWriteAfter(results, electedAt)
	t.Logf("with two members: the longest time without an acknowledged write %s; the first write acknowledged %s after the new leader was seen",
		gap.Round(time.Millisecond), resumed.Round(time.Millisecond))
	// Once etcd has a leader the API must take writes at once, and go on.
	if resumed > 2*time.Second {
		t.Errorf("the first write after etcd elected a new leader was acknowledged %s later", resumed)
	}
	if after := writeGap(results, electedAt, secondLostAt); after > 2*time.Second {
		t.Errorf("with two of three members and a leader, no write was acknowledged for %s", after)
	}
	// With one member nothing may be acknowledged.
	if ok1, _ := count(byPhase["1 member"]); ok1 > 0 {
		t.Errorf("%d writes acknowledged without an etcd quorum", ok1)
	}
	for _, err := range readErrs {
		t.Error(err)
	}
	for _, r := range byPhase["1 member"] {
		if r.err != nil && !serverSideFailure(r.err) {
			t.Errorf("write %s without a quorum failed as a client error, not a server one: %v", r.name, r.err)
			break
		}
	}
	// Recovered: writes are acknowledged again.
	if okR, _ := count(byPhase["recovered"]); okR == 0 {
		t.Errorf("no write acknowledged after the members came back")
	}

	// Every acknowledged object is there with the UID it was answered
	// with, read back with a quorum read.
	list, err := client.MetacontrollerV1alpha1().CompositeControllers().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]types.UID{}
	for _, cc := range list.Items {
		stored[cc.Name] = cc.UID
	}
	acknowledged, lost := 0, 0
	for _, r := range results {
		if r.err != nil {
			continue
		}
		acknowledged++
		if stored[r.name] != r.uid {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s (uid %s, %s) is %q after recovery", r.name, r.uid, r.phase, stored[r.name])
			}
		}
	}
	t.Logf("%d writes acknowledged, %d objects stored, %d acknowledged ones lost", acknowledged, len(stored), lost)

	// Each member, restarted ones included, holds every object.
	for _, m := range c.members {
		cli := c.etcdClient(t, m.clientURL)
		var keys int64
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			resp, err := cli.Get(ctx, ccKeys, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
			if err != nil {
				return false, nil
			}
			keys = resp.Count
			return keys == int64(len(stored)), nil
		})
		if err != nil {
			t.Errorf("member %s holds %d CompositeControllers, the API %d", m.name, keys, len(stored))
		}
	}

	// Encrypted at rest: etcd holds no CompositeController in the clear.
	cli := c.etcdClient(t, endpoints...)
	for _, name := range []string{"q-0"} {
		resp, err := cli.Get(context.Background(), ccKeys+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("can't read %s from etcd: %v", name, err)
		}
		value := string(resp.Kvs[0].Value)
		if !strings.HasPrefix(value, "k8s:enc:aescbc:v1:key1:") || strings.Contains(value, "hook.example") {
			t.Errorf("%s is not encrypted in etcd: %q", name, value[:min(len(value), 80)])
		}
	}

	backupAndRestore(t, c, bin.CompositeAPIServer, encryption, stored)
}

// startServer runs composite-apiserver in standalone mode on the etcd of
// endpoints, with TLS to it and encryption at rest, and returns a client of
// its API once it is ready.
func startServer(t *testing.T, bin, dir string, c *cluster, endpoints []string, encryption string) (versioned.Interface, *framework.Process) {
	t.Helper()
	args := []string{
		"--standalone", "--data-dir=" + dir, "--secure-port=" + strconv.Itoa(freePort(t)),
		"--etcd-servers=" + strings.Join(endpoints, ","), "--etcd-prefix=" + etcdPrefix,
		"--etcd-cafile=" + c.ca, "--etcd-certfile=" + c.client.CertFile, "--etcd-keyfile=" + c.client.KeyFile,
		"--encryption-provider-config=" + encryption,
	}
	server, err := framework.StartProcess("composite-apiserver-"+filepath.Base(dir), c.dir, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop(30 * time.Second) })
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		if exited, err := server.Exited(); exited {
			return false, fmt.Errorf("composite-apiserver exited: %v", err)
		}
		return strings.Contains(server.Tail(100000), "composite-apiserver is ready"), nil
	})
	if err != nil {
		t.Fatalf("composite-apiserver never ready: %v\n%s", err, server.Tail(4000))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 1000
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// backupAndRestore follows artifacts/deploy/README.md: etcdctl snapshot
// save from one member, etcdutl snapshot restore into a new cluster (one
// member here), and a new server on it serves every object the old one
// held, with its UID.
func backupAndRestore(t *testing.T, c *cluster, serverBin, encryption string, stored map[string]types.UID) {
	t.Helper()
	tools, err := framework.FindEtcdClients()
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(tools, name), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	snapshot := filepath.Join(c.dir, "snapshot.db")
	run("etcdctl", "--endpoints="+c.members[0].clientURL, "--cacert="+c.ca, "--cert="+c.client.CertFile, "--key="+c.client.KeyFile,
		"snapshot", "save", snapshot)
	t.Logf("etcdutl snapshot status:\n%s", strings.TrimSpace(run("etcdutl", "snapshot", "status", snapshot, "-w", "table")))

	restored := c.newMember(t, "restored-0")
	initial := restored.name + "=" + restored.peerURL
	dataDir := filepath.Join(c.dir, restored.name)
	run("etcdutl", "snapshot", "restore", snapshot, "--data-dir", dataDir, "--name", restored.name,
		"--initial-cluster", initial, "--initial-cluster-token", "restored", "--initial-advertise-peer-urls", restored.peerURL)
	restored.args = c.args(t, restored, initial, dataDir)
	c.start(t, restored)
	c.waitReady(t, restored)

	client, _ := startServer(t, serverBin, filepath.Join(c.dir, "restored-server"), c, []string{restored.clientURL}, encryption)
	list, err := client.MetacontrollerV1alpha1().CompositeControllers().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]types.UID{}
	for _, cc := range list.Items {
		got[cc.Name] = cc.UID
	}
	missing := 0
	for name, uid := range stored {
		if got[name] != uid {
			missing++
		}
	}
	t.Logf("restored from the snapshot: %d of %d objects served with their UIDs", len(stored)-missing, len(stored))
	if missing > 0 || len(got) != len(stored) {
		t.Errorf("after the restore the server serves %d objects, %d of the %d backed up missing or changed", len(got), missing, len(stored))
	}
}

// readsWithoutQuorum reads without a quorum: a get and a list that ask for
// the latest state must fail, never answer from a stale copy as if it were
// current.
func readsWithoutQuorum(t *testing.T, client versioned.Interface) []error {
	t.Helper()
	ccs := client.MetacontrollerV1alpha1().CompositeControllers()
	reads := map[string]func(ctx context.Context) error{
		"get": func(ctx context.Context) error {
			_, err := ccs.Get(ctx, "q-0", metav1.GetOptions{})
			return err
		},
		"list": func(ctx context.Context) error {
			_, err := ccs.List(ctx, metav1.ListOptions{})
			return err
		},
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for name, read := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			start := time.Now()
			err := read(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				errs = append(errs, fmt.Errorf("a %s answered without an etcd quorum", name))
				return
			}
			t.Logf("%s without a quorum, after %s: %v", name, time.Since(start).Round(100*time.Millisecond), err)
		}()
	}
	wg.Wait()
	return errs
}

// serverSideFailure tells a failure the server or the connection caused
// (5xx, 429, a timeout) from one that blames the request.
func serverSideFailure(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 || code == http.StatusTooManyRequests || code == 0
	}
	return true
}

func count(rs []result) (ok, failed int) {
	for _, r := range rs {
		if r.err == nil {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

func describeErrors(rs []result) string {
	kinds := map[string]int{}
	sample := map[string]string{}
	for _, r := range rs {
		if r.err == nil {
			continue
		}
		k := "other"
		var status apierrors.APIStatus
		switch {
		case errors.As(r.err, &status):
			k = fmt.Sprintf("%d %s", status.Status().Code, status.Status().Reason)
		case errors.Is(r.err, context.DeadlineExceeded) || strings.Contains(r.err.Error(), "deadline"):
			k = "client timeout"
		}
		kinds[k]++
		sample[k] = r.err.Error()
	}
	if len(kinds) == 0 {
		return ""
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s: %d, e.g. %q", k, n, sample[k]))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, "; ") + ")"
}

// firstWriteAfter is how long after since a write was first acknowledged
// (forever when none was).
func firstWriteAfter(results []result, since time.Time) time.Duration {
	first := time.Duration(1<<63 - 1)
	for _, r := range results {
		if r.err == nil && r.done.After(since) {
			first = min(first, r.done.Sub(since))
		}
	}
	return first
}

// writeGap is the longest time between from and to in which no write was
// acknowledged.
func writeGap(results []result, from, to time.Time) time.Duration {
	times := []time.Time{from, to}
	for _, r := range results {
		if r.err == nil && r.done.After(from) && r.done.Before(to) {
			times = append(times, r.done)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var gap time.Duration
	for i := 1; i < len(times); i++ {
		gap = max(gap, times[i].Sub(times[i-1]))
	}
	return gap
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
