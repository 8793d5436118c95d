package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestShippedDeploymentSyncsEachParentOnOneReplica runs, for each
// Deployment an admin can install (artifacts/deploy/deployment.yaml, and the
// one the chart renders with its default values), as many servers as it has
// replicas, each with its arguments but for where it runs (etcd, port,
// certificates: framework.DeploymentServerArgs; the stack's own server keeps
// the package's --workers and -v before them), and syncs parents through a
// hook that tells which replica called it: every call comes from one
// replica, the one the Lease names; with the chart's sharding, every call
// about a parent comes from one replica.
func TestShippedDeploymentSyncsEachParentOnOneReplica(t *testing.T) {
	// Sequential: stops the server, starts replicas and changes the APIService's caBundle.
	hook := suite.HelloHook(t)
	t.Run("artifacts/deploy", func(t *testing.T) {
		d, err := framework.ShippedDeployment()
		if err != nil {
			t.Fatal(err)
		}
		runDeployment(t, hook, d, "artifacts-deploy", framework.DeploymentServerArgs(d), nil)
	})
	// The chart's Deployment serves with the certificate the chart
	// generates (its Secret's files where the Deployment mounts them), and
	// the APIService trusts the CA the chart puts in its caBundle: the
	// aggregator reaches the replicas with the chart's own PKI.
	t.Run("chart", func(t *testing.T) {
		d, args, caBundle := renderedDeployment(t, "")
		runDeployment(t, hook, d, "chart", args, caBundle)
	})
	// With sharding, every replica runs the loop for its shards: each
	// parent is synced by one of them.
	t.Run("chart-sharded", func(t *testing.T) {
		modes, err := framework.ChartModes()
		if err != nil {
			t.Fatal(err)
		}
		d, args, caBundle := renderedDeployment(t, modes["sharded"])
		runDeployment(t, hook, d, "chart-sharded", args, caBundle)
	})
}

// renderedDeployment renders the chart with values (none when empty) and
// returns its Deployment, the server arguments to run it with here, and
// the CA its server would register as the APIService's caBundle (the file
// of its --apiservice-ca-file).
func renderedDeployment(t *testing.T, values string) (*appsv1.Deployment, []string, []byte) {
	t.Helper()
	rendered, err := framework.RenderChart(framework.CompositeNamespace, values)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	// One rendering: its Deployment and the Secrets it mounts belong
	// together (each rendering generates anew).
	d := &appsv1.Deployment{}
	for _, o := range objs {
		if o.Kind == "Deployment" {
			if err := yaml.UnmarshalStrict([]byte(o.YAML), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	substituted, err := framework.SubstituteSecretMounts(d, objs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := framework.DeploymentServerArgs(d)
	var caBundle []byte
	for _, a := range substituted {
		if strings.HasPrefix(a, "--tls-cert-file=") || strings.HasPrefix(a, "--tls-private-key-file=") {
			args = append(args, a)
		}
		if file, ok := strings.CutPrefix(a, "--apiservice-ca-file="); ok {
			if caBundle, err = os.ReadFile(file); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d, args, caBundle
}

// useServingCA makes the APIService, and the stack's own readiness checks,
// trust caPEM, until restore is called.
func useServingCA(t *testing.T, caPEM []byte) (restore func()) {
	t.Helper()
	ctx := context.Background()
	set := func(ca []byte) error {
		api, err := suite.Aggregator.ApiregistrationV1().APIServices().Get(ctx, framework.APIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		api.Spec.CABundle = ca
		_, err = suite.Aggregator.ApiregistrationV1().APIServices().Update(ctx, api, metav1.UpdateOptions{})
		return err
	}
	previous, err := suite.Aggregator.ApiregistrationV1().APIServices().Get(ctx, framework.APIServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	undo := suite.TrustServingCA(caPEM)
	if err := set(caPEM); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := set(previous.Spec.CABundle); err != nil {
			t.Error(err)
		}
		undo()
	}
}

// runDeployment runs d's replicas with args in place of the stack's own
// server; with servingCA, the APIService trusts that CA meanwhile (the
// replicas serve a certificate of the chart's), and only while the stack's
// own server is stopped, so that kube-apiserver never sees a server its
// APIService does not trust.
func runDeployment(t *testing.T, hook *framework.PythonHook, d *appsv1.Deployment, suffix string, args []string, servingCA []byte) {
	ctx := context.Background()
	o, err := framework.DeploymentOptions(d)
	if err != nil {
		t.Fatal(err)
	}
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	if replicas < 2 {
		t.Skipf("the Deployment runs %d replica", replicas)
	}
	t.Logf("the Deployment's arguments beside the stack's own: %q", args)

	// The stack's own server becomes the first replica, so that the API
	// (through the APIService) is served as shipped too; it runs as the
	// package's tests want it again afterwards.
	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	restoreCA := func() {}
	if servingCA != nil {
		restoreCA = useServingCA(t, servingCA)
	}
	t.Cleanup(func() {
		if err := suite.StopComposite(); err != nil {
			t.Error(err)
		}
		restoreCA()
		if err := suite.StartComposite(ctx); err != nil {
			t.Fatal(err)
		}
		if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
			t.Fatal(err)
		}
	})
	if err := suite.StartComposite(ctx, args...); err != nil {
		t.Fatal(err)
	}
	procs := []*framework.Process{suite.CompositeProcess()}
	for i := 1; i < replicas; i++ {
		p := suite.MustStartReplica(t, ctx, fmt.Sprintf("%s-replica-%d", suffix, i), args...)
		defer p.Stop(30 * time.Second)
		procs = append(procs, p)
	}
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		t.Fatal(err)
	}
	if o.Shards > 0 {
		// Parents created while shards still move could be synced by
		// their old owner and then their new one.
		waitShardsSettled(t, o.LeaderElection.Name, o.Shards, replicas)
	}

	calls := recordCallers(t, hook.URL, procs)
	ns := suite.Namespace(t, "loop-shipped-"+suffix)
	c := framework.HelloController{Name: "loop-shipped-" + suffix, HookURL: calls.url}
	c.Create(t, suite)
	const parents = 5
	generations := make([]int64, parents)
	for i := range generations {
		generations[i] = suite.CreateHello(t, ns, fmt.Sprintf("p%d", i), c.Name, framework.HelloSpec("blue", "a")).GetGeneration()
	}
	// Two generations each: both replicas' loops, if both ran, would have
	// had every parent to sync twice.
	for i, generation := range generations {
		name := fmt.Sprintf("p%d", i)
		suite.WaitObserved(t, ns, name, generation)
		suite.WaitObserved(t, ns, name, suite.SetHelloSpec(t, ns, name, framework.HelloSpec("green", "a")))
	}

	byReplica := calls.byReplica(ns)
	t.Logf("hook calls by replica: %v", byReplica)
	if o.Shards > 0 {
		onlyCaller(t, calls.parents(ns))
		return
	}
	if len(byReplica) != 1 {
		t.Fatalf("the hook was called for the parents of %s by %v: one replica may run the loop", ns, byReplica)
	}
	var caller string
	for name := range byReplica {
		caller = name
	}
	holder, leader, err := leaseHolder(ctx, o.LeaderElection.Namespace, o.LeaderElection.Name, procs...)
	if err != nil {
		t.Fatalf("can't read the Lease %s/%s: %v", o.LeaderElection.Namespace, o.LeaderElection.Name, err)
	}
	if leader == nil || leader.Name != caller {
		t.Errorf("every hook call came from %s, but the Lease is held by %q", caller, holder)
	}
}

// callers is a hook in front of another that records, for each call, the
// replica of composite-apiserver that made it and the parent it was about,
// and counts the calls about a parent made while another about it was in
// flight.
type callers struct {
	url string
	mu  sync.Mutex
	// calls counts the calls per parent's namespace and replica's name;
	// a caller that is none of the replicas is "unknown".
	calls map[string]map[string]int
	// byParent counts the calls per parent (namespace/name) and replica.
	byParent map[string]map[string]int
	// inFlight are the calls being answered, per parent; overlaps counts
	// the calls that began while another about the same parent was.
	inFlight map[string]int
	overlaps int
	// procs are the replicas a call may come from (add).
	procs []*framework.Process
	// delay is how long each call is held before it is answered: a slow
	// hook, whose calls overlap if two syncs of a parent run at once.
	delay time.Duration
}

func recordCallers(t *testing.T, hookURL string, procs []*framework.Process) *callers {
	t.Helper()
	return recordSlowCallers(t, hookURL, 0, procs)
}

// recordSlowCallers is recordCallers with each call held for delay before
// it goes to the hook.
func recordSlowCallers(t *testing.T, hookURL string, delay time.Duration, procs []*framework.Process) *callers {
	t.Helper()
	target, err := url.Parse(hookURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	c := &callers{calls: map[string]map[string]int{}, byParent: map[string]map[string]int{}, inFlight: map[string]int{}, procs: procs, delay: delay}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Parent struct {
				Metadata struct{ Namespace, Name string }
			}
		}
		_ = json.Unmarshal(body, &req)
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		name := "unknown"
		c.mu.Lock()
		procs := c.procs
		c.mu.Unlock()
		if local != nil {
			if p, err := framework.ConnectionOwner(r.RemoteAddr, local.String(), procs...); err != nil {
				name = "unknown (" + err.Error() + ")"
			} else if p != nil {
				name = p.Name
			}
		}
		parent := req.Parent.Metadata.Namespace + "/" + req.Parent.Metadata.Name
		c.mu.Lock()
		if c.calls[req.Parent.Metadata.Namespace] == nil {
			c.calls[req.Parent.Metadata.Namespace] = map[string]int{}
		}
		c.calls[req.Parent.Metadata.Namespace][name]++
		if c.byParent[parent] == nil {
			c.byParent[parent] = map[string]int{}
		}
		c.byParent[parent][name]++
		if c.inFlight[parent] > 0 {
			c.overlaps++
		}
		c.inFlight[parent]++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.inFlight[parent]--
			c.mu.Unlock()
		}()
		time.Sleep(c.delay)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// add makes calls from p known by p's name.
func (c *callers) add(p *framework.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// byReplica counts the calls about parents of namespace by replica.
func (c *callers) byReplica(namespace string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for name, n := range c.calls[namespace] {
		out[name] = n
	}
	return out
}

// parents counts the calls about each parent of namespace by replica.
func (c *callers) parents(namespace string) map[string]map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]int{}
	for parent, by := range c.byParent {
		if strings.HasPrefix(parent, namespace+"/") {
			out[parent] = maps.Clone(by)
		}
	}
	return out
}

// overlapping counts the calls made about a parent while another about it
// was in flight.
func (c *callers) overlapping() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overlaps
}

// leaseHolder reads the Lease of the loop's leader election and tells which
// of procs holds it: a replica's identity is <host>_<pid>_<nanoseconds>.
// The process is nil when none of procs does.
func leaseHolder(ctx context.Context, namespace, name string, procs ...*framework.Process) (string, *framework.Process, error) {
	l, err := suite.Kube.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil, nil
	}
	holder := *l.Spec.HolderIdentity
	for _, p := range procs {
		if strings.Contains(holder, "_"+strconv.Itoa(p.Pid())+"_") {
			return holder, p, nil
		}
	}
	return holder, nil, nil
}
