package loop

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// Environment of the fuzzed-answers test: COMPOSITE_E2E_LONG=1 sends
// longFuzzedAnswers answers instead of fuzzedAnswers;
// COMPOSITE_E2E_FUZZ_ANSWERS sets the number; COMPOSITE_E2E_FUZZ_SEED
// replays a run (each run logs its seed).
const (
	envLong        = "COMPOSITE_E2E_LONG"
	envFuzzAnswers = "COMPOSITE_E2E_FUZZ_ANSWERS"
	envFuzzSeed    = "COMPOSITE_E2E_FUZZ_SEED"

	fuzzedAnswers     = 1000
	longFuzzedAnswers = 5000
)

// TestFuzzedHookAnswersWriteNothing answers live syncs of a converged parent
// with mutated answers, one per /sync (the hook serves answer i to call i):
// broken JSON, wrong types, children in other namespaces or of undeclared
// kinds, duplicates, answers past the size limit, nesting past the decoder's
// depth limit, invalid UTF-8, numbers out of range, nulls; and answers the
// engine plans but kube-apiserver refuses (a ConfigMap's data that is not a
// string, invalid names and labels, a child too big to store). Every answer
// is one that must change nothing: each /sync must answer 502 HookFailed, or,
// for what only kube-apiserver can refuse, a plan whose every change
// failed; and a watch on the children and the parent, opened before the
// first answer, must see no event at all, and every object must keep its
// UID and resourceVersion. Afterwards the server is healthy, and a normal
// sync converges a change, seen by the same watch: the watch is not blind.
func TestFuzzedHookAnswersWriteNothing(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	ctx := context.Background()
	n := fuzzedAnswers
	if os.Getenv(envLong) == "1" {
		n = longFuzzedAnswers
	}
	if v := os.Getenv(envFuzzAnswers); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", envFuzzAnswers, v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envFuzzSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envFuzzSeed, v, err)
		}
	}
	t.Logf("%d answers, seed %d (replay with %s=%d)", n, seed, envFuzzSeed, seed)

	hook := newAnswerHook(t)
	ns := suite.Namespace(t, "loop-fuzz-answers")
	c := framework.HelloController{Name: "loop-fuzz-answers", HookURL: hook.srv.URL}
	c.Create(t, suite)
	s := framework.HelloSpec("blue", "a", "b")
	s["service"] = true
	parent := suite.CreateHello(t, ns, "p", c.Name, s)
	parent = suite.WaitObserved(t, ns, "p", parent.GetGeneration())

	// Converged: a live sync with the valid answer changes nothing. It
	// also proves the answer the mutations start from is what the
	// children are.
	if res, err := suite.LiveSync(ctx, c.Name, ns, "p"); err != nil {
		t.Fatalf("a live sync of the converged parent: %v", err)
	} else if changed := changes(res); len(changed) > 0 {
		t.Fatalf("a live sync of the converged parent changed %v", changed)
	}
	// The loop must not call the hook while it serves the mutations:
	// nothing writes the parent or its children while it does, so the
	// loop has nothing to sync; wait until it is done with what the
	// convergence queued.
	hook.waitIdle(t, 2*time.Second)

	before := snapshot(t, ns, parent)
	w := watchFamily(t, ns, parent, before)

	g := &answerGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ns: ns, parent: parent}
	g.base = normalAnswer(parent)
	g.baseJSON = mustJSON(t, g.base)
	hook.arm()

	start := time.Now()
	tally := map[string]map[string]int{}
	var failures []string
	for i := 0; i < n; i++ {
		// One at a time: some are 16 MiB.
		m := g.next()
		hook.set(&m)
		res, err := suite.LiveSync(ctx, c.Name, ns, "p")
		got, problem := judge(&m, res, err)
		if tally[m.class] == nil {
			tally[m.class] = map[string]int{}
		}
		tally[m.class][got]++
		if problem != "" {
			failures = append(failures, fmt.Sprintf("answer %d (%s: %s, %d bytes): %s", i, m.class, m.detail, len(m.body), problem))
		}
		if down := suite.Down(); down != nil {
			t.Fatalf("after answer %d (%s: %s): the stack is down: %v", i, m.class, m.detail, down)
		}
	}
	elapsed := time.Since(start)
	served := hook.disarm()

	for _, f := range failures[:min(len(failures), 30)] {
		t.Error(f)
	}
	if len(failures) > 30 {
		t.Errorf("... and %d more answers judged wrongly", len(failures)-30)
	}
	if served != n {
		t.Errorf("the hook served %d of the %d answers: a live /sync must call it exactly once, and the loop not at all", served, n)
	}
	t.Logf("%d answers in %s (%.0f/s); outcomes by class:\n%s", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), formatTally(tally))

	// Nothing moved: no event on any child or the parent, every object
	// as it was, nothing of the parent's anywhere else.
	if evs := w.get(); len(evs) > 0 {
		t.Errorf("%d writes seen while the mutated answers were served, e.g. %v", len(evs), evs[:min(len(evs), 10)])
	}
	after := snapshot(t, ns, parent)
	for key, v := range before {
		if after[key] != v {
			t.Errorf("%s: %s before, %s after the mutated answers", key, v, after[key])
		}
	}
	for key, v := range after {
		if _, ok := before[key]; !ok {
			t.Errorf("%s appeared (%s)", key, v)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Still serving, and still syncing: a normal answer for a changed
	// parent converges, and the watch that saw nothing sees it.
	healthz(t)
	generation := suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"color": "green", "configMaps": []interface{}{"a", "b"}, "service": true})
	got := suite.WaitObserved(t, ns, "p", generation)
	if color, _, _ := unstructured.NestedString(got.Object, "status", "color"); color != "green" {
		t.Errorf("status %v after the fix, want color green", got.Object["status"])
	}
	suite.Eventually(t, "the watch seeing p-a and p-b turn green", func() (bool, error) {
		modified := map[string]bool{}
		for _, e := range w.get() {
			if e.Type == watch.Modified {
				modified[e.Name] = true
			}
		}
		return modified["ConfigMap p-a"] && modified["ConfigMap p-b"], nil
	})
	for name, cm := range suite.ConfigMaps(t, ns) {
		if cm.Data["color"] != "green" || !strings.HasPrefix(before["ConfigMap "+name], string(cm.UID)+" ") {
			t.Errorf("ConfigMap %s after the fix: data %v, uid %s; want green, same uid (%s)", name, cm.Data, cm.UID, before["ConfigMap "+name])
		}
	}
}

// changes lists the plan items of a sync that change something.
func changes(res *v1alpha1.SyncRequest) []string {
	var out []string
	for _, item := range res.Status.Plan {
		if item.Action != v1alpha1.SyncActionUnchanged {
			out = append(out, fmt.Sprintf("%s %s %s", item.Action, item.Kind, item.Name))
		}
	}
	return out
}

// outcome is how an answer must be turned down.
type outcome int

const (
	// refusedByServer: the webhook client or the engine refuses the
	// answer as a whole: 502 HookFailed, nothing planned.
	refusedByServer outcome = iota
	// refusedByCluster: the answer is well-formed and within the
	// contract, but what it asks kube-apiserver refuses (a ConfigMap's
	// data that is not a string, an invalid name or label, a child too big
	// to store): every change of the plan fails, or the server refuses it
	// already.
	refusedByCluster
)

// mutation is one answer of the hook.
type mutation struct {
	class, detail string
	body          []byte
	// chunked sends the body without a Content-Length.
	chunked bool
	expect  outcome
}

// judge checks a live sync's answer against what m must get, and returns
// what happened ("502 HookFailed", "plan refused by kube-apiserver", ...)
// and, when that is wrong, why.
func judge(m *mutation, res *v1alpha1.SyncRequest, err error) (got, problem string) {
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return "no answer", fmt.Sprintf("no answer from the server: %v", err)
		}
		st := status.Status()
		got = fmt.Sprintf("%d %s", st.Code, st.Reason)
		if st.Code == http.StatusBadGateway && st.Reason == "HookFailed" {
			return got, ""
		}
		return got, fmt.Sprintf("%s: %.300s; want 502 HookFailed", got, st.Message)
	}
	if m.expect == refusedByServer {
		return "synced", fmt.Sprintf("the sync went through (plan %v, warnings %.300q); want 502 HookFailed", planSummary(res), res.Status.Warnings)
	}
	var done []string
	for _, item := range res.Status.Plan {
		if item.Action != v1alpha1.SyncActionUnchanged && item.Error == "" {
			done = append(done, fmt.Sprintf("%s %s %s", item.Action, item.Kind, item.Name))
		}
	}
	if len(done) > 0 {
		return "synced", fmt.Sprintf("the sync did %v; want every change refused", done)
	}
	if len(changes(res)) == 0 {
		return "synced", "the plan changes nothing; want a change that kube-apiserver refuses"
	}
	return "refused by kube-apiserver", ""
}

func planSummary(res *v1alpha1.SyncRequest) []string {
	var out []string
	for _, item := range res.Status.Plan {
		s := fmt.Sprintf("%s %s %s", item.Action, item.Kind, item.Name)
		if item.Error != "" {
			s += " (failed)"
		}
		out = append(out, s)
	}
	return out
}

func formatTally(tally map[string]map[string]int) string {
	classes := make([]string, 0, len(tally))
	for c := range tally {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var b strings.Builder
	for _, c := range classes {
		outcomes := make([]string, 0, len(tally[c]))
		for o, k := range tally[c] {
			outcomes = append(outcomes, fmt.Sprintf("%s ×%d", o, k))
		}
		sort.Strings(outcomes)
		fmt.Fprintf(&b, "  %-22s %s\n", c, strings.Join(outcomes, ", "))
	}
	return b.String()
}

// answerHook is a sync hook in the test process, over real HTTP. Unarmed,
// it answers what hook.py answers in its ok mode (status {color}, a
// ConfigMap <parent>-<item> per spec.configMaps, a Service with
// spec.service), so that waitObserved applies; armed, call i gets answer i.
type answerHook struct {
	srv *httptest.Server

	mu    sync.Mutex
	armed bool
	// answer is the answer for the next call; nil once it was served.
	answer  *mutation
	served  int
	lastHit time.Time
}

func newAnswerHook(t *testing.T) *answerHook {
	h := &answerHook{}
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *answerHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.lastHit = time.Now()
	if h.armed {
		h.served++
		m := h.answer
		h.answer = nil
		h.mu.Unlock()
		if m == nil {
			// More calls than answers: the test fails on the count; the
			// server must write nothing for a 500 either.
			http.Error(w, "no answer left", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !m.chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(m.body)))
			_, _ = w.Write(m.body)
			return
		}
		// Without a Content-Length the client must read to find out.
		flusher, _ := w.(http.Flusher)
		for rest := m.body; len(rest) > 0; {
			k := min(len(rest), 1<<20)
			if _, err := w.Write(rest[:k]); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			rest = rest[k:]
		}
		return
	}
	h.mu.Unlock()
	var req hookapi.SyncHookRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Parent == nil {
		http.Error(w, fmt.Sprintf("not a sync request: %v", err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(normalAnswer(req.Parent))
}

// waitIdle waits until the hook has had no call for quiet.
func (h *answerHook) waitIdle(t *testing.T, quiet time.Duration) {
	t.Helper()
	suite.Eventually(t, fmt.Sprintf("the hook idle for %s", quiet), func() (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return time.Since(h.lastHit) >= quiet, nil
	})
}

// arm makes the hook answer only what set gives it, each answer once.
func (h *answerHook) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.answer, h.served = true, nil, 0
}

// set makes m the answer of the next call.
func (h *answerHook) set(m *mutation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = m
}

// disarm goes back to normal answers and returns how many calls came
// while armed.
func (h *answerHook) disarm() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.answer = false, nil
	return h.served
}

// normalAnswer is hook.py's ok answer for parent, as JSON-decoded values.
func normalAnswer(parent *unstructured.Unstructured) map[string]interface{} {
	name := parent.GetName()
	color, found, _ := unstructured.NestedString(parent.Object, "spec", "color")
	if !found {
		color = "none"
	}
	items, _, _ := unstructured.NestedStringSlice(parent.Object, "spec", "configMaps")
	service, _, _ := unstructured.NestedBool(parent.Object, "spec", "service")
	children := []interface{}{}
	for _, item := range items {
		children = append(children, map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": name + "-" + item, "labels": map[string]interface{}{"app": name}},
			"data":     map[string]interface{}{"color": color, "item": item},
		})
	}
	if service {
		children = append(children, map[string]interface{}{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]interface{}{"name": name, "labels": map[string]interface{}{"app": name}},
			"spec": map[string]interface{}{
				"selector": map[string]interface{}{"app": name},
				"ports":    []interface{}{map[string]interface{}{"port": 80.0, "targetPort": 8080.0}},
			},
		})
	}
	return map[string]interface{}{"status": map[string]interface{}{"color": color}, "children": children}
}

func mustJSON(t *testing.T, v interface{}) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// snapshot is every object of the parent's family, keyed "<Kind> <name>",
// with its UID and resourceVersion: the children in its namespace, the
// parent, and whatever carries its controller-uid label anywhere in the
// cluster (a child let into another namespace or of another kind).
func snapshot(t *testing.T, ns string, parent *unstructured.Unstructured) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	p := suite.GetHello(t, ns, parent.GetName())
	out["Hello "+p.GetName()] = fmt.Sprintf("%s rv=%s", p.GetUID(), p.GetResourceVersion())
	for name, cm := range suite.ConfigMaps(t, ns) {
		out["ConfigMap "+name] = fmt.Sprintf("%s rv=%s", cm.UID, cm.ResourceVersion)
	}
	svcs, err := suite.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		out["Service "+s.Name] = fmt.Sprintf("%s rv=%s", s.UID, s.ResourceVersion)
	}
	selector := "controller-uid=" + string(parent.GetUID())
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "secrets"},
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "namespaces"}, {Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		list, err := suite.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if o.GetNamespace() == ns && (gvr.Resource == "configmaps" || gvr.Resource == "services") {
				continue
			}
			out[fmt.Sprintf("%s %s/%s (labelled with the parent's uid)", o.GetKind(), o.GetNamespace(), o.GetName())] = fmt.Sprintf("%s rv=%s", o.GetUID(), o.GetResourceVersion())
		}
	}
	return out
}

// familyWatch collects every event on the ConfigMaps and Services of a
// namespace and on the parent, from the resourceVersions of a snapshot on.
type familyWatch struct{ record[familyEvent] }

type familyEvent struct {
	Type watch.EventType
	// Name is "<Kind> <name>".
	Name string
}

func watchFamily(t *testing.T, ns string, parent *unstructured.Unstructured, before map[string]string) *familyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fw := &familyWatch{}
	// The lists' resourceVersions: the watches start where the snapshot
	// was taken, so that no write in between escapes them.
	cms, err := suite.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := suite.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parents, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + parent.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	// The lists came after the snapshot: a write in between shows as a
	// difference with it.
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" && before["ConfigMap "+cm.Name] != fmt.Sprintf("%s rv=%s", cm.UID, cm.ResourceVersion) {
			t.Fatalf("ConfigMap %s changed while the watches started", cm.Name)
		}
	}
	for _, p := range parents.Items {
		if before["Hello "+p.GetName()] != fmt.Sprintf("%s rv=%s", p.GetUID(), p.GetResourceVersion()) {
			t.Fatalf("the parent changed while the watches started")
		}
	}
	start := func(kind string, w watch.Interface, err error) {
		if err != nil {
			t.Fatalf("can't watch %ss: %v", kind, err)
		}
		go func() {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.ResultChan():
					if !ok {
						// A watch that ends early would hide writes.
						if ctx.Err() == nil {
							fw.add(familyEvent{Type: watch.Error, Name: kind + " watch closed"})
						}
						return
					}
					name := "?"
					if o, ok := e.Object.(metav1.Object); ok {
						name = o.GetName()
					}
					if kind == "ConfigMap" && name == "kube-root-ca.crt" {
						continue
					}
					fw.add(familyEvent{Type: e.Type, Name: kind + " " + name})
				}
			}
		}()
	}
	w, err := suite.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cms.ResourceVersion})
	start("ConfigMap", w, err)
	w, err = suite.Kube.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: svcs.ResourceVersion})
	start("Service", w, err)
	w, err = suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: parents.GetResourceVersion(), FieldSelector: "metadata.name=" + parent.GetName()})
	start("Hello", w, err)
	return fw
}

// healthz checks composite-apiserver's /healthz as the aggregator reaches
// it, with kube-apiserver's own front-proxy client certificate, on a client
// of its own: issuing a certificate would rewrite that one's files, and
// client-go's cached transports are shared with other tests.
func healthz(t *testing.T) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(suite.Certs.FrontProxyClient.CertFile, suite.Certs.FrontProxyClient.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(suite.Certs.ServingCA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, suite.CompositeURL()+"/healthz", nil)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := (&http.Client{Transport: transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("composite-apiserver /healthz: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("composite-apiserver /healthz: %d %s", resp.StatusCode, data)
	}
}

// answerGen makes mutated answers from the valid answer of a converged
// parent; each is one that must change nothing.
type answerGen struct {
	r        *rand.Rand
	ns       string
	parent   *unstructured.Unstructured
	base     map[string]interface{}
	baseJSON []byte
}

// A raw JSON text put where a marker string was: for what json.Marshal
// can't write (1e400, bytes that are not UTF-8, nesting past its depth).
const rawMarker = "@@raw@@"

// generators are the kinds of mutations and their weights: the costly ones
// (answers of many MiB) are rare.
var generators = []struct {
	weight int
	gen    func(g *answerGen) mutation
}{
	{6, (*answerGen).truncated},
	{3, (*answerGen).trailingGarbage},
	{5, (*answerGen).controlCharacter},
	{6, (*answerGen).invalidUTF8},
	{3, (*answerGen).notAnObject},
	{5, (*answerGen).wrongTopLevelType},
	{10, (*answerGen).wrongChildType},
	{5, (*answerGen).otherNamespace},
	{6, (*answerGen).undeclaredKind},
	{4, (*answerGen).duplicate},
	{3, (*answerGen).foreignSelector},
	{4, (*answerGen).missingField},
	{3, (*answerGen).deepNesting},
	{4, (*answerGen).numberOutOfRange},
	{1, (*answerGen).tooLarge},
	// What only kube-apiserver can refuse.
	{4, (*answerGen).dataNotAString},
	{3, (*answerGen).invalidName},
	{3, (*answerGen).invalidLabel},
	{1, (*answerGen).tooBigToStore},
	{2, (*answerGen).unknownField},
	{2, (*answerGen).invalidServicePort},
}

func (g *answerGen) next() mutation {
	total := 0
	for _, x := range generators {
		total += x.weight
	}
	k := g.r.IntN(total)
	for _, x := range generators {
		if k < x.weight {
			return x.gen(g)
		}
		k -= x.weight
	}
	panic("unreachable")
}

func (g *answerGen) pick(n int) int { return g.r.IntN(n) }

func pickOf[T any](g *answerGen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// answer is a deep copy of the valid answer.
func (g *answerGen) answer() map[string]interface{} {
	var m map[string]interface{}
	if err := json.Unmarshal(g.baseJSON, &m); err != nil {
		panic(err)
	}
	return m
}

func (g *answerGen) children(a map[string]interface{}) []interface{} {
	return a["children"].([]interface{})
}

// child is a random child of a, and its index; configMap limits the choice
// to ConfigMaps.
func (g *answerGen) child(a map[string]interface{}, configMap bool) (map[string]interface{}, int) {
	var idx []int
	for i, c := range g.children(a) {
		if !configMap || c.(map[string]interface{})["kind"] == "ConfigMap" {
			idx = append(idx, i)
		}
	}
	i := idx[g.pick(len(idx))]
	return g.children(a)[i].(map[string]interface{}), i
}

func metaOf(c map[string]interface{}) map[string]interface{} {
	return c["metadata"].(map[string]interface{})
}

// encode writes a as JSON, the marker string replaced by raw.
func encode(a interface{}, raw []byte) []byte {
	data, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	if raw != nil {
		data = bytes.Replace(data, []byte(`"`+rawMarker+`"`), raw, 1)
	}
	return data
}

func (g *answerGen) mutation(class, detail string, body []byte) mutation {
	return mutation{class: class, detail: detail, body: body, expect: refusedByServer}
}

func (g *answerGen) truncated() mutation {
	cut := g.pick(len(g.baseJSON))
	return g.mutation("truncated", fmt.Sprintf("cut at byte %d of %d", cut, len(g.baseJSON)), g.baseJSON[:cut])
}

func (g *answerGen) trailingGarbage() mutation {
	tail := pickOf(g, "x", "}", "]", ",", "{}", "null", `""`, "0", "{")
	return g.mutation("trailing garbage", fmt.Sprintf("%q after the answer", tail), append(append([]byte{}, g.baseJSON...), tail...))
}

// controlCharacter puts a byte that is JSON nowhere (a control character
// other than the whitespace ones) anywhere in the answer.
func (g *answerGen) controlCharacter() mutation {
	c := pickOf(g, byte(0x00), 0x01, 0x07, 0x08, 0x0b, 0x0c, 0x0e, 0x1b, 0x1f)
	pos := g.pick(len(g.baseJSON) + 1)
	body := append(append(append([]byte{}, g.baseJSON[:pos]...), c), g.baseJSON[pos:]...)
	return g.mutation("control character", fmt.Sprintf("0x%02x at byte %d", c, pos), body)
}

// invalidUTF8 puts bytes that are not UTF-8 into one of the answer's
// strings: JSON is UTF-8, and decoding would silently make them U+FFFD.
func (g *answerGen) invalidUTF8() mutation {
	a := g.answer()
	var leaves []func(string)
	var paths []string
	var walk func(v interface{}, path string, set func(interface{}))
	walk = func(v interface{}, path string, set func(interface{})) {
		switch x := v.(type) {
		case map[string]interface{}:
			for k, e := range x {
				walk(e, path+"."+k, func(nv interface{}) { x[k] = nv })
			}
		case []interface{}:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", path, i), func(nv interface{}) { x[i] = nv })
			}
		case string:
			leaves = append(leaves, func(marker string) { set(x + marker) })
			paths = append(paths, path)
		}
	}
	walk(a, "", nil)
	i := g.pick(len(leaves))
	bad := pickOf(g, "\xff", "\xfe", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82", "\x80", "\xf8\x88\x80\x80\x80", "\xf4\x90\x80\x80")
	leaves[i]("@@bad@@")
	body := bytes.Replace(encode(a, nil), []byte("@@bad@@"), []byte(bad), 1)
	return g.mutation("invalid UTF-8", fmt.Sprintf("%q in %s", bad, paths[i]), body)
}

func (g *answerGen) notAnObject() mutation {
	body := pickOf(g, "null", "[]", `"ok"`, "5", "true", "["+string(g.baseJSON)+"]", "", " ")
	return g.mutation("not an object", fmt.Sprintf("%.20q", body), []byte(body))
}

func (g *answerGen) wrongTopLevelType() mutation {
	a := g.answer()
	field := pickOf(g, "children", "status", "resyncAfterSeconds", "finalized")
	var v interface{}
	switch field {
	case "children":
		v = pickOf[interface{}](g, map[string]interface{}{}, "x", 5, true, map[string]interface{}{"a": a["children"]})
	case "status":
		v = pickOf[interface{}](g, "ready", 5, []interface{}{a["status"]}, true)
	case "resyncAfterSeconds":
		v = pickOf[interface{}](g, "5", map[string]interface{}{}, []interface{}{5}, true)
	case "finalized":
		v = pickOf[interface{}](g, "yes", 1, map[string]interface{}{}, []interface{}{})
	}
	a[field] = v
	return g.mutation("wrong type", fmt.Sprintf("%s: %v", field, v), encode(a, nil))
}

func (g *answerGen) wrongChildType() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	var field string
	var v interface{}
	switch g.pick(9) {
	case 0:
		field, v = "", pickOf[interface{}](g, "p-a", 5, []interface{}{c}, true, nil)
		g.children(a)[i] = v
	case 1:
		field, v = "apiVersion", pickOf[interface{}](g, 1, map[string]interface{}{"v": 1}, []interface{}{"v1"}, true, nil, "")
		c[field] = v
	case 2:
		field, v = "kind", pickOf[interface{}](g, 5, []interface{}{"ConfigMap"}, false, nil, "")
		c[field] = v
	case 3:
		field, v = "metadata", pickOf[interface{}](g, "p-a", 5, []interface{}{metaOf(c)}, nil)
		c[field] = v
	case 4:
		field, v = "metadata.name", pickOf[interface{}](g, 5, map[string]interface{}{"name": metaOf(c)["name"]}, nil, "", []interface{}{metaOf(c)["name"]})
		metaOf(c)["name"] = v
	case 5:
		field, v = "metadata.labels", pickOf[interface{}](g, "app=p", 5, []interface{}{"app"})
		metaOf(c)["labels"] = v
	case 6:
		field, v = "metadata.labels.app", pickOf[interface{}](g, 5, true, map[string]interface{}{}, []interface{}{"p"}, nil)
		metaOf(c)["labels"].(map[string]interface{})["app"] = v
	case 7:
		field, v = "metadata.annotations", pickOf[interface{}](g, map[string]interface{}{"a": 5}, map[string]interface{}{"a": nil}, "a=b", []interface{}{})
		metaOf(c)["annotations"] = v
	case 8:
		field, v = "metadata.namespace", pickOf[interface{}](g, 5, map[string]interface{}{}, []interface{}{g.ns}, true)
		metaOf(c)["namespace"] = v
	}
	return g.mutation("wrong type in a child", fmt.Sprintf("children[%d].%s: %#v", i, field, v), encode(a, nil))
}

func (g *answerGen) otherNamespace() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	other := pickOf(g, "default", "kube-system", "kube-public", framework.CompositeNamespace, g.ns+"-other", "loop-basic")
	metaOf(c)["namespace"] = other
	return g.mutation("other namespace", fmt.Sprintf("children[%d] in %s", i, other), encode(a, nil))
}

func (g *answerGen) undeclaredKind() mutation {
	name := g.parent.GetName()
	kinds := []map[string]interface{}{
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]interface{}{"name": name + "-sneaky"}, "stringData": map[string]interface{}{"k": "v"}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{"name": name + "-pod"}, "spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "c", "image": "busybox"}}}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": name + "-ns"}},
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]interface{}{"name": name + "-deploy"}},
		{"apiVersion": "example.com/v1", "kind": "Hello", "metadata": map[string]interface{}{"name": pickOf(g, name, name+"-child")}},
		{"apiVersion": "v1", "kind": "Bogus", "metadata": map[string]interface{}{"name": name + "-bogus"}},
		{"apiVersion": "v2", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": name + "-a"}},
		{"apiVersion": "example.com/v1", "kind": "ConfigMap", "metadata": map[string]interface{}{"name": name + "-a"}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]interface{}{"name": name + "-admin"}, "rules": []interface{}{}},
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]interface{}{"name": name + "-sa"}},
	}
	k := kinds[g.pick(len(kinds))]
	a := g.answer()
	how := "added"
	if g.pick(2) == 0 {
		_, i := g.child(a, false)
		g.children(a)[i] = k
		how = fmt.Sprintf("in place of children[%d]", i)
	} else {
		a["children"] = append(g.children(a), k)
	}
	return g.mutation("undeclared kind", fmt.Sprintf("%s %s %s", k["apiVersion"], k["kind"], how), encode(a, nil))
}

func (g *answerGen) duplicate() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	dup := deepCopyJSON(c)
	detail := fmt.Sprintf("children[%d] twice", i)
	switch g.pick(3) {
	case 1:
		if d, ok := dup["data"].(map[string]interface{}); ok {
			d["color"] = "red"
			detail += ", the copy red"
		}
	case 2:
		metaOf(dup)["namespace"] = g.ns
		detail += ", the copy with the parent's namespace spelled out"
	}
	a["children"] = append(g.children(a), dup)
	return g.mutation("duplicate", detail, encode(a, nil))
}

func deepCopyJSON(m map[string]interface{}) map[string]interface{} {
	data, _ := json.Marshal(m)
	var out map[string]interface{}
	_ = json.Unmarshal(data, &out)
	return out
}

// foreignSelector labels a child with another parent's controller-uid:
// it would be released as soon as it was written.
func (g *answerGen) foreignSelector() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	metaOf(c)["labels"].(map[string]interface{})["controller-uid"] = pickOf(g, "00000000-0000-0000-0000-000000000000", "", "someone-else")
	return g.mutation("foreign selector", fmt.Sprintf("children[%d] labelled for another parent", i), encode(a, nil))
}

func (g *answerGen) missingField() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	field := pickOf(g, "apiVersion", "kind", "metadata", "metadata.name")
	if field == "metadata.name" {
		delete(metaOf(c), "name")
	} else {
		delete(c, field)
	}
	return g.mutation("missing field", fmt.Sprintf("children[%d] without %s", i, field), encode(a, nil))
}

// deepNesting nests arrays past the JSON decoder's depth limit (10,000)
// somewhere in the answer.
func (g *answerGen) deepNesting() mutation {
	depth := pickOf(g, 10001, 100000, 1000000)
	raw := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
	a := g.answer()
	where := pickOf(g, "data", "status", "unknown field", "children")
	switch where {
	case "data":
		c, _ := g.child(a, true)
		c["data"].(map[string]interface{})["deep"] = rawMarker
	case "status":
		a["status"].(map[string]interface{})["deep"] = rawMarker
	case "unknown field":
		a["deep"] = rawMarker
	case "children":
		a["children"] = append(g.children(a), rawMarker)
	}
	return g.mutation("deep nesting", fmt.Sprintf("%d nested arrays in %s", depth, where), encode(a, raw))
}

func (g *answerGen) numberOutOfRange() mutation {
	num := pickOf(g, "1e400", "-1e400", "1e999999", "123e45678")
	a := g.answer()
	where := pickOf(g, "resyncAfterSeconds", "data", "status", "label", "port")
	switch where {
	case "resyncAfterSeconds":
		a["resyncAfterSeconds"] = rawMarker
	case "data":
		c, _ := g.child(a, true)
		c["data"].(map[string]interface{})["color"] = rawMarker
	case "status":
		a["status"].(map[string]interface{})["replicas"] = rawMarker
	case "label":
		c, _ := g.child(a, false)
		metaOf(c)["labels"].(map[string]interface{})["app"] = rawMarker
	case "port":
		for _, c := range g.children(a) {
			if s, ok := c.(map[string]interface{})["spec"].(map[string]interface{}); ok {
				s["ports"].([]interface{})[0].(map[string]interface{})["port"] = rawMarker
			}
		}
	}
	return g.mutation("number out of range", fmt.Sprintf("%s in %s", num, where), encode(a, []byte(num)))
}

// tooLarge pads a valid answer past the server's 16 MiB answer limit, with
// or without a Content-Length.
func (g *answerGen) tooLarge() mutation {
	a := g.answer()
	a["padding"] = strings.Repeat("x", 16<<20)
	m := g.mutation("too large", "16 MiB of padding", encode(a, nil))
	if g.pick(2) == 0 {
		m.chunked = true
		m.detail += ", no Content-Length"
	}
	return m
}

func (g *answerGen) clusterRefuses(class, detail string, body []byte) mutation {
	return mutation{class: class, detail: detail, body: body, expect: refusedByCluster}
}

func (g *answerGen) dataNotAString() mutation {
	a := g.answer()
	c, i := g.child(a, true)
	v := pickOf[interface{}](g, 5, true, 1.5, map[string]interface{}{"x": "y"}, []interface{}{"blue"}, rawMarker)
	c["data"].(map[string]interface{})["color"] = v
	var raw []byte
	if v == rawMarker {
		raw = []byte("123456789012345678901234567890")
		v = string(raw)
	}
	return g.clusterRefuses("data not a string", fmt.Sprintf("children[%d].data.color: %#v", i, v), encode(a, raw))
}

// invalidName adds a ConfigMap no apiserver accepts the name of; the
// others stay as they are.
func (g *answerGen) invalidName() mutation {
	a := g.answer()
	name := pickOf(g, "Bad_Name", "-leading-dash", strings.Repeat("a", 254), "UPPER", "dots..dots", "a b")
	a["children"] = append(g.children(a), map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name, "labels": map[string]interface{}{"app": g.parent.GetName()}},
		"data":     map[string]interface{}{"color": "blue"},
	})
	return g.clusterRefuses("invalid name", fmt.Sprintf("a ConfigMap named %.40q", name), encode(a, nil))
}

func (g *answerGen) invalidLabel() mutation {
	a := g.answer()
	c, i := g.child(a, false)
	labels := metaOf(c)["labels"].(map[string]interface{})
	var detail string
	switch g.pick(3) {
	case 0:
		labels["app"] = "not valid!"
		detail = "app: not valid!"
	case 1:
		labels["app"] = strings.Repeat("x", 64)
		detail = "app: 64 characters"
	case 2:
		labels["bad key!"] = "x"
		detail = "a key 'bad key!'"
	}
	return g.clusterRefuses("invalid label", fmt.Sprintf("children[%d] %s", i, detail), encode(a, nil))
}

// tooBigToStore makes a ConfigMap bigger than kube-apiserver stores (1 MiB
// of data) or accepts in a request (3 MiB), within the answer limit.
func (g *answerGen) tooBigToStore() mutation {
	a := g.answer()
	c, i := g.child(a, true)
	size := pickOf(g, 1<<20+1<<19, 3<<20+1<<19)
	c["data"].(map[string]interface{})["color"] = strings.Repeat("b", size)
	return g.clusterRefuses("too big to store", fmt.Sprintf("children[%d] with %d bytes of data", i, size), encode(a, nil))
}

func (g *answerGen) unknownField() mutation {
	a := g.answer()
	c, i := g.child(a, true)
	field := pickOf(g, "spec", "bogusField", "stringData")
	c[field] = map[string]interface{}{"x": "y"}
	return g.clusterRefuses("unknown field", fmt.Sprintf("children[%d].%s", i, field), encode(a, nil))
}

func (g *answerGen) invalidServicePort() mutation {
	a := g.answer()
	port := pickOf(g, 70000, 0, -1)
	for _, c := range g.children(a) {
		if s, ok := c.(map[string]interface{})["spec"].(map[string]interface{}); ok {
			s["ports"].([]interface{})[0].(map[string]interface{})["port"] = port
		}
	}
	return g.clusterRefuses("invalid Service", fmt.Sprintf("port %d", port), encode(a, nil))
}
