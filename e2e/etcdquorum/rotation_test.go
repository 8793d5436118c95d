package etcdquorum

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/transport"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	versioned "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// replica is one server process behind the request loop, as a
// Deployment's pod behind its Service: taken out of the rotation before it
// stops, put back once it is ready.
type replica struct {
	name     string
	restarts int
	client   versioned.Interface
	proc     *framework.Process
	serving  bool
	inFlight int
}

// servingLoop sends creates through the replicas in turn, from a few
// clients at once, and counts every answer.
type servingLoop struct {
	mu       sync.Mutex
	replicas []*replica
	next     int
	phase    string
	ok       map[string]int
	failures []string
	// leaderChanges are writes etcd answered "request timed out" or
	// "leader changed": in flight when the member leading restarted, as in
	// any rolling restart of etcd (the quorum test's leader loss), not a
	// refused certificate.
	leaderChanges []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

func (l *servingLoop) pick() *replica {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range l.replicas {
		r := l.replicas[l.next%len(l.replicas)]
		l.next++
		if r.serving {
			r.inFlight++
			return r
		}
	}
	return nil
}

func (l *servingLoop) run(workers int) {
	l.stop = make(chan struct{})
	l.ok = map[string]int{}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// A steady rate, so that the replicas restarted along the
			// way do not start on an ever larger store.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				r := l.pick()
				if r == nil {
					l.record(fmt.Errorf("no replica in the rotation"))
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				name := fmt.Sprintf("rot-%d-%d", w, i)
				_, err := r.client.MetacontrollerV1alpha1().CompositeControllers().Create(ctx, controller(name), metav1.CreateOptions{})
				cancel()
				if err != nil {
					err = fmt.Errorf("create %s through %s: %w", name, r.name, err)
				}
				l.mu.Lock()
				r.inFlight--
				l.mu.Unlock()
				l.record(err)
			}
		}()
	}
}

func (l *servingLoop) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		f := fmt.Sprintf("%s: %v", l.phase, err)
		if strings.Contains(err.Error(), "etcdserver: request timed out") || strings.Contains(err.Error(), "etcdserver: leader changed") {
			l.leaderChanges = append(l.leaderChanges, f)
			return
		}
		l.failures = append(l.failures, f)
		return
	}
	l.ok[l.phase]++
}

func (l *servingLoop) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

// waitAnswered waits for 20 requests answered in phase (or a failure).
func (l *servingLoop) waitAnswered(t *testing.T, phase string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.ok[phase] >= 20 || len(l.failures) > 0, nil
	})
	if err != nil {
		t.Errorf("requests not answered %s the rotation: %v", phase, err)
	}
}

// drain takes r out of the rotation and waits for its requests in flight.
func (l *servingLoop) drain(t *testing.T, r *replica) {
	t.Helper()
	l.mu.Lock()
	r.serving = false
	l.mu.Unlock()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 2*callTimeout, true, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return r.inFlight == 0, nil
	})
	if err != nil {
		t.Fatalf("%s's requests did not finish: %v", r.name, err)
	}
}

// TestEtcdCertificateRotationThroughACABundleNeverCutsTheServerOff rotates the
// bundled etcd's CA and every certificate as artifacts/deploy/README.md
// says ("Rotating etcd's certificates"), on three members running the
// chart's arguments and two server replicas serving a request loop: the
// Secrets' ca.crt first holds the old and the new CA, then the new
// certificates replace the old, then the old CA goes, each step followed
// by a rolling restart of the members and then of the replicas. Every step
// keeps answering, and no request fails but those etcd answers "request
// timed out" or "leader changed" when the member leading restarts (as in
// any roll of etcd, a retryable 500; never a refused certificate). At the
// end the members present certificates of the new CA and refuse a client
// certificate of the old one. Without the transitional bundle (step 1
// giving the new CA alone) the first member restarted refuses its peers and
// never becomes ready: the roll stalls.
func TestEtcdCertificateRotationThroughACABundleNeverCutsTheServerOff(t *testing.T) {
	bin := findBinaries(t)
	dir := t.TempDir()
	c := newCluster(t, bin.Etcd, dir)
	oldClient := c.client
	clientDir := c.clientSecretDir(t)
	c.startAll(t)

	l := &servingLoop{phase: "before"}
	start := func(r *replica) {
		r.restarts++
		client, proc := startServer(t, bin.CompositeAPIServer, filepath.Join(dir, fmt.Sprintf("%s-%d", r.name, r.restarts)), c, c.endpoints(), "")
		l.mu.Lock()
		r.client, r.proc, r.serving = client, proc, true
		l.mu.Unlock()
	}
	for i := range 2 {
		r := &replica{name: fmt.Sprintf("server-%d", i)}
		l.replicas = append(l.replicas, r)
		start(r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range l.replicas {
				t.Logf("%s:\n%s", r.name, r.proc.Tail(3000))
			}
			for _, m := range c.members {
				t.Logf("%s:\n%s", m.name, m.proc.Tail(2000))
			}
		}
	})
	l.run(2)
	stopped := false
	stopLoop := func() {
		if !stopped {
			stopped = true
			close(l.stop)
			l.wg.Wait()
		}
	}
	defer stopLoop()
	l.waitAnswered(t, "before")

	next := newGeneration(t, filepath.Join(dir, "new-certs"))
	newMember, newClient, newCA := next.member, next.client, next.ca
	oldCA := framework.ReadFile(t, filepath.Join(c.tlsDir, "ca.crt"))

	// Each step writes the two Secrets' files (the members' and the
	// server's) and rolls the members, then the replicas, one at a time.
	secrets := map[string]string{"server": c.tlsDir, "client": clientDir}
	steps := []struct {
		name  string
		files map[string]map[string][]byte
	}{
		{"1 both CAs trusted", map[string]map[string][]byte{
			"server": {"ca.crt": concat(oldCA, newCA)}, "client": {"ca.crt": concat(oldCA, newCA)}}},
		{"2 new certificates", map[string]map[string][]byte{
			"server": {"tls.crt": framework.ReadFile(t, newMember.CertFile), "tls.key": framework.ReadFile(t, newMember.KeyFile)},
			"client": {"tls.crt": framework.ReadFile(t, newClient.CertFile), "tls.key": framework.ReadFile(t, newClient.KeyFile)}}},
		{"3 old CA dropped", map[string]map[string][]byte{"server": {"ca.crt": newCA}, "client": {"ca.crt": newCA}}},
	}
	for _, step := range steps {
		l.setPhase(step.name)
		for secret, files := range step.files {
			for name, data := range files {
				writeAtomically(t, filepath.Join(secrets[secret], name), data)
			}
		}
		took := time.Now()
		l.rollEverything(t, c, start)
		l.mu.Lock()
		t.Logf("step %s: members and replicas rolled in %s; %d requests answered, %d failed so far (and %d timed out by a restarting leader)",
			step.name, time.Since(took).Round(100*time.Millisecond), l.ok[step.name], len(l.failures), len(l.leaderChanges))
		l.mu.Unlock()
	}
	l.setPhase("after")
	// A last round through both replicas on the rotated certificates.
	l.waitAnswered(t, "after")
	stopLoop()
	for _, phase := range []string{"before", steps[0].name, steps[1].name, steps[2].name, "after"} {
		if l.ok[phase] == 0 {
			t.Errorf("no request was answered during %q: the loop did not cover it", phase)
		}
	}
	for _, f := range l.leaderChanges {
		t.Logf("a write in flight when the member leading restarted: %s", f)
	}
	for i, f := range l.failures {
		if i == 10 {
			t.Errorf("... %d failures in all", len(l.failures))
			break
		}
		t.Errorf("a request failed during the rotation: %s", f)
	}

	checkRotated(t, c, oldCA, newCA, oldClient, newClient)
}

// generation is a new CA and, signed by it, a member and a client
// certificate for the same names and uses as the old ones.
type generation struct {
	ca             []byte
	member, client framework.CertKey
}

func newGeneration(t *testing.T, dir string) generation {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	next, err := framework.NewCerts(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := generation{ca: framework.ReadFile(t, next.ServingCA.CertFile)}
	if g.member, err = next.Issue(next.ServingCA, "etcd", nil, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")},
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatal(err)
	}
	if g.client, err = next.Issue(next.ServingCA, "composite-apiserver", nil, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatal(err)
	}
	return g
}

// rollEverything restarts the members one at a time, each once the others
// are ready (a StatefulSet's rolling update), then the replicas one at a
// time, each taken out of the rotation first (a Deployment's).
func (l *servingLoop) rollEverything(t *testing.T, c *cluster, start func(*replica)) {
	t.Helper()
	for _, m := range c.members {
		if err := m.proc.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		c.start(t, m)
		c.waitReady(t, c.members...)
	}
	for _, r := range l.replicas {
		l.drain(t, r)
		if err := r.proc.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		start(r)
	}
}

// checkRotated: the members present certificates of the new CA only, and
// refuse a client certificate of the old one.
func checkRotated(t *testing.T, c *cluster, oldCA, newCA []byte, oldClient, newClient framework.CertKey) {
	t.Helper()
	for _, m := range c.members {
		if err := tryEtcd(t, m.clientURL, newCA, newClient); err != nil {
			t.Errorf("%s with the new CA and the new client certificate: %v", m.name, err)
		}
		if err := tryEtcd(t, m.clientURL, oldCA, newClient); err == nil {
			t.Errorf("%s still presents a certificate of the old CA", m.name)
		}
		if err := tryEtcd(t, m.clientURL, newCA, oldClient); err == nil {
			t.Errorf("%s still accepts a client certificate of the old CA", m.name)
		}
	}
}

// tryEtcd reads from the member at url trusting caPEM and presenting
// client: nil once a read is answered.
func tryEtcd(t *testing.T, url string, caPEM []byte, client framework.CertKey) error {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeAtomically(t, caFile, caPEM)
	tlsConfig, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		CAFile: caFile, CertFile: client.CertFile, KeyFile: client.KeyFile,
	}})
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tlsConfig, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "rotation-check")
	return err
}

func concat(pems ...[]byte) []byte {
	var out []byte
	for _, p := range pems {
		out = append(out, p...)
	}
	return out
}
