package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var (
	hellosGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// environment holds the clients and the hook every benchmark uses. The
// clients are the administrator's with client-side rate limiting off, so
// that the benchmark's own requests are never what is measured.
type environment struct {
	fast *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// cc reaches composite-apiserver through kube-apiserver.
	cc   clientset.Interface
	hook *hookServer
}

func newEnvironment(ctx context.Context) (*environment, error) {
	if err := suite.InstallHellos(ctx); err != nil {
		return nil, err
	}
	e := &environment{fast: rest.CopyConfig(suite.AdminConfig)}
	// A negative QPS turns client-go's token bucket off.
	e.fast.QPS, e.fast.Burst = -1, 0
	var err error
	if e.kube, err = kubernetes.NewForConfig(e.fast); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(e.fast); err != nil {
		return nil, err
	}
	if e.cc, err = clientset.NewForConfig(e.fast); err != nil {
		return nil, err
	}
	e.hook = newHookServer()
	return e, nil
}

// hookServer is the in-process Go sync hook of every benchmark controller,
// served over real HTTP on 127.0.0.1: controller <name> has its hook at
// <URL>/<name>/sync. It answers spec.children (default 10) ConfigMaps
// <parent>-0..n-1 and a status, and counts its calls per parent.
type hookServer struct {
	srv *httptest.Server
	mux *http.ServeMux
	// owners remembers which replica holds each open connection
	// (hookStats.attribute), by its client address, until it closes: a
	// closed connection's port may be another replica's next.
	owners sync.Map

	mu    sync.Mutex
	stats map[string]*hookStats
}

type hookStats struct {
	calls atomic.Int64
	// tracking makes the hook report in its status how many of its
	// children it observed, as most real hooks do (trackingHookResponse).
	tracking atomic.Bool

	mu      sync.Mutex
	parents map[string]int
	// inFlight are the calls being answered per parent; overlaps counts
	// the calls that began while another about the same parent was.
	inFlight map[string]int
	overlaps int
	// replicas, when set (attribute), are the processes whose calls
	// byReplica counts per parent; callers remembers each connection's.
	replicas  []*framework.Process
	byReplica map[string]map[string]int
	owners    *sync.Map
}

// callerAddrs are a hook request's client and server addresses, which the
// hook needs to tell which replica called (framework.ConnectionOwner).
type callerAddrs struct{ remote, local string }

type callerKey struct{}

// withCaller puts the request's addresses in its context for the hook.
func withCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local != nil {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, callerAddrs{remote: r.RemoteAddr, local: local.String()}))
		}
		next.ServeHTTP(w, r)
	})
}

// begin counts a call about parent, and whether one about it was in
// flight; end must follow when it is answered.
func (s *hookStats) begin(ctx context.Context, parent string) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parents[parent]++
	if s.inFlight[parent] > 0 {
		s.overlaps++
	}
	s.inFlight[parent]++
	if len(s.replicas) == 0 {
		return
	}
	name := "unknown"
	if addrs, ok := ctx.Value(callerKey{}).(callerAddrs); ok {
		// A connection's owner never changes: read /proc once for each.
		if cached, ok := s.owners.Load(addrs.remote); ok {
			name = cached.(string)
		} else if p, err := framework.ConnectionOwner(addrs.remote, addrs.local, s.replicas...); err == nil && p != nil {
			name = p.Name
			s.owners.Store(addrs.remote, name)
		}
	}
	if s.byReplica[parent] == nil {
		s.byReplica[parent] = map[string]int{}
	}
	s.byReplica[parent][name]++
}

func (s *hookStats) end(parent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight[parent]--
}

// attribute counts from now on which of replicas makes each call.
func (s *hookStats) attribute(replicas ...*framework.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas = replicas
	s.byReplica = map[string]map[string]int{}
}

// callersOf are the calls so far about each parent, by replica
// (attribute).
func (s *hookStats) callersOf() map[string]map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]int, len(s.byReplica))
	for parent, by := range s.byReplica {
		out[parent] = maps.Clone(by)
	}
	return out
}

// overlapping counts the calls about a parent that began while another
// about it was in flight.
func (s *hookStats) overlapping() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlaps
}

func newHookServer() *hookServer {
	h := &hookServer{mux: http.NewServeMux(), stats: map[string]*hookStats{}}
	h.srv = httptest.NewUnstartedServer(h.mux)
	h.srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
		if state == http.StateClosed || state == http.StateHijacked {
			h.owners.Delete(c.RemoteAddr().String())
		}
	}
	h.srv.Start()
	return h
}

// register serves controller's hook and returns the URL its webhook takes
// (the manifest appends /sync).
func (h *hookServer) register(controller string) string {
	return h.serve(controller, func(st *hookStats, req *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
		if st.tracking.Load() {
			return trackingHookResponse(req)
		}
		return hookResponse(req.Parent)
	})
}

// serve is register with the hook's answers from respond (given the
// controller's stats), counted as register counts them.
func (h *hookServer) serve(controller string, respond func(*hookStats, *hookapi.SyncHookRequest) *hookapi.SyncHookResponse) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.stats[controller]; !ok {
		st := &hookStats{parents: map[string]int{}, inFlight: map[string]int{}, owners: &h.owners}
		h.stats[controller] = st
		h.mux.Handle("/"+controller+"/sync", withCaller(hookapi.SyncHandler(hookapi.SyncHookFunc(
			func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
				parent := req.Parent.GetNamespace() + "/" + req.Parent.GetName()
				st.begin(ctx, parent)
				defer st.end(parent)
				return respond(st, req), nil
			}))))
	}
	return h.srv.URL + "/" + controller
}

func (h *hookServer) of(controller string) *hookStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats[controller]
}

// reset forgets the calls so far.
func (s *hookStats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls.Store(0)
	s.parents = map[string]int{}
	s.overlaps = 0
	if s.byReplica != nil {
		s.byReplica = map[string]map[string]int{}
	}
}

// distinct is the number of parents the hook was called for.
func (s *hookStats) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parents)
}

// perParent counts the parents by how many calls the hook had about each:
// "1", "2", "3", "4+".
func (s *hookStats) perParent() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, n := range s.parents {
		key := strconv.Itoa(n)
		if n >= 4 {
			key = "4+"
		}
		out[key]++
	}
	return out
}

// hookResponse is the benchmarks' hook: spec.children ConfigMaps named
// <parent>-<i>, and a status.
func hookResponse(parent *unstructured.Unstructured) *hookapi.SyncHookResponse {
	n, found, _ := unstructured.NestedInt64(parent.Object, "spec", "children")
	if !found {
		n = 10
	}
	name := parent.GetName()
	children := make([]*unstructured.Unstructured, 0, n)
	for i := int64(0); i < n; i++ {
		children = append(children, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]interface{}{"name": fmt.Sprintf("%s-%d", name, i)},
			"data":       map[string]interface{}{"parent": name, "index": strconv.FormatInt(i, 10)},
		}})
	}
	return &hookapi.SyncHookResponse{
		Status:   map[string]interface{}{"children": n, "phase": "Ready"},
		Children: children,
	}
}

// trackingHookResponse is hookResponse with the status a real hook
// writes: how many of its children it observed (status.observed), and
// phase Ready only once they all exist. Each child it observes changes
// its answer, so the loop must call it once more after creating them.
func trackingHookResponse(req *hookapi.SyncHookRequest) *hookapi.SyncHookResponse {
	resp := hookResponse(req.Parent)
	observed := int64(len(req.Children["ConfigMap.v1"]))
	phase := "Creating"
	if observed == int64(len(resp.Children)) {
		phase = "Ready"
	}
	resp.Status = map[string]interface{}{"children": int64(len(resp.Children)), "observed": observed, "phase": phase}
	return resp
}

// benchController is a CompositeController of the hellos labelled
// bench=<name>, with ConfigMap children and a generated selector: each
// benchmark's controller sees only its own parents.
func benchController(name, hookURL string) framework.ControllerFixture {
	return framework.ControllerFixture{Name: name, HookURL: hookURL, SelectBy: "bench", Timeout: "30s"}
}

// createController applies the benchmark controller name with the
// in-process hook and waits until its loop runs.
func createController(ctx context.Context, name string) (*v1alpha1.CompositeController, error) {
	return createControllerWith(ctx, name, nil)
}

// createControllerWith is createController with spec edited by spec.
func createControllerWith(ctx context.Context, name string, spec func(*acv1alpha1.CompositeControllerSpecApplyConfiguration)) (*v1alpha1.CompositeController, error) {
	controller := benchController(name, env.hook.register(name))
	controller.Spec = spec
	return applyController(ctx, controller)
}

// applyController applies controller and waits until its loop runs.
func applyController(ctx context.Context, controller framework.ControllerFixture) (*v1alpha1.CompositeController, error) {
	name := controller.Name
	if err := suite.Apply(ctx, controller.Manifest()); err != nil {
		return nil, err
	}
	var got *v1alpha1.CompositeController
	// Ready waits for its informers' first lists: at B2's 10,000 parents,
	// after the smaller sizes and the baselines, hundreds of thousands of
	// ConfigMaps, which take minutes on two cores.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = env.cc.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		return nil, fmt.Errorf("CompositeController %s never became Ready: %w", name, err)
	}
	return got, nil
}

func deleteController(name string) {
	_ = env.cc.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
}

// newParent is a Hello of controller ctrl that asks for children
// ConfigMaps.
func newParent(namespace, name, ctrl string, children int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Hello",
		"metadata": map[string]interface{}{
			"name": name, "namespace": namespace,
			"labels": map[string]interface{}{"bench": ctrl},
		},
		"spec": map[string]interface{}{"children": int64(children)},
	}}
}

// runCount numbers the invocations of a benchmark, so that each one gets
// namespaces and controllers of its own.
var runCount atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, runCount.Add(1))
}

// forEach calls do(i) for i in [0, n) on workers goroutines and returns
// each call's latency (indexed by i) and the first error.
func forEach(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				start := time.Now()
				err := do(ctx, i)
				lat[i] = time.Since(start)
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, firstErr
}

// percentile returns the p-th percentile (0 < p <= 1) of sorted by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func sortedCopy(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeVerbs are the verbs of apiserver_request_total that change stored
// objects: it labels requests with their HTTP method (create is POST,
// update is PUT, delete and deletecollection are DELETE), except that a
// server-side apply is APPLY rather than PATCH.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true}

// writeCounts reads kube-apiserver's apiserver_request_total and sums the
// non-dry-run writes on resources, keyed "<resource>[/<subresource>]
// <VERB>".
func writeCounts(ctx context.Context, resources ...string) (map[string]float64, error) {
	return requestCounts(ctx, func(verb string) bool { return writeVerbs[verb] }, resources...)
}

// allCounts is every request of every client, each resource and verb:
// what a phase cost kube-apiserver beyond the writes it was measured by.
func allCounts(ctx context.Context) (map[string]float64, error) {
	return requestCounts(ctx, func(string) bool { return true })
}

// selectCounts is the part of counts (keyed as requestCounts keys them)
// whose verb verbs accepts, on resources.
func selectCounts(counts map[string]float64, verbs func(string) bool, resources ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range counts {
		target, verb, _ := strings.Cut(k, " ")
		resource, _, _ := strings.Cut(target, "/")
		if verbs(verb) && slices.Contains(resources, resource) {
			out[k] = v
		}
	}
	return out
}

// requestCounts sums apiserver_request_total's samples of verbs on
// resources (every resource when none is named).
func requestCounts(ctx context.Context, verbs func(string) bool, resources ...string) (map[string]float64, error) {
	data, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("can't read kube-apiserver's /metrics: %w", err)
	}
	want := map[string]bool{}
	for _, r := range resources {
		want[r] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, err := parseSample(line[len("apiserver_request_total"):])
		if err != nil {
			return nil, fmt.Errorf("can't parse %q: %w", line, err)
		}
		if (len(want) > 0 && !want[labels["resource"]]) || !verbs(labels["verb"]) || labels["dry_run"] != "" {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key+" "+labels["verb"]] += value
	}
	return out, sc.Err()
}

// parseSample parses `{k="v",...} value` of the Prometheus text format.
func parseSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	if !strings.HasPrefix(s, "{") {
		return nil, 0, fmt.Errorf("no labels")
	}
	i := 1
	for i < len(s) && s[i] != '}' {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, 0, fmt.Errorf("no = in labels")
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("label %s has no quoted value", name)
		}
		i++
		var v strings.Builder
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				continue
			}
			v.WriteByte(s[i])
		}
		i++ // closing quote
		labels[name] = v.String()
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
	if i >= len(s) {
		return nil, 0, fmt.Errorf("unterminated labels")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	return labels, value, err
}

// diffCounts returns after-before for every key that changed, and the total.
func diffCounts(before, after map[string]float64) (map[string]float64, float64) {
	out := map[string]float64{}
	var total float64
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}

// formatCounts renders counts sorted by key.
func formatCounts(c map[string]float64) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, c[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// sumWhere sums the counts whose key starts with prefix.
func sumWhere(c map[string]float64, prefix string) float64 {
	var total float64
	for k, v := range c {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

var (
	aggregatorOnce    sync.Once
	aggregatorHTTP    *http.Client
	aggregatorHTTPErr error
)

// serverGet GETs path straight from composite-apiserver the way
// kube-apiserver's aggregator reaches it (front-proxy client certificate,
// an administrator in the X-Remote-* headers): kube-apiserver proxies only
// the API group, not the server's /metrics or /debug/pprof.
func serverGet(ctx context.Context, path string) ([]byte, error) {
	aggregatorOnce.Do(func() {
		cert, err := suite.Certs.Issue(suite.Certs.FrontProxyCA, framework.FrontProxyClientName, nil, nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			aggregatorHTTPErr = err
			return
		}
		aggregatorHTTP, aggregatorHTTPErr = suite.CompositeHTTPClient(&cert)
	})
	if aggregatorHTTPErr != nil {
		return nil, aggregatorHTTPErr
	}
	var data []byte
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if data, err = getAsAggregator(ctx, path); err == nil {
			return data, nil
		}
		// client-go shares one transport per certificate, and the
		// front-proxy certificate's files are always the same: after a
		// restart of composite-apiserver (BenchmarkConvergedResync,
		// BenchmarkCRUD) the pool holds connections to the old process.
		aggregatorHTTP.CloseIdleConnections()
	}
	return nil, err
}

func getAsAggregator(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, suite.CompositeURL()+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := aggregatorHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("can't GET %s from composite-apiserver: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s from composite-apiserver: %s: %.200s", path, resp.Status, data)
	}
	return data, nil
}
