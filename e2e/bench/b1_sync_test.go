package bench

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// syncBench is the state BenchmarkDryRunSync's variants share.
type syncBench struct {
	controller *v1alpha1.CompositeController
	namespace  string
	hookURL    string
	children   int

	bareClient   *http.Client
	directClient *http.Client
	directURL    string

	// bareRPS is the baseline's throughput, once measured.
	bareRPS float64
	// directRPS is direct's throughput, once measured: the baseline of
	// the variant with patches.
	directRPS float64
	// patched is the controller of the variant with two inline patches,
	// once created, and patchedURL its sync subresource.
	patched    *v1alpha1.CompositeController
	patchedURL string
	// refusals are the answers to identity headers without the
	// certificate and to the certificate without the headers.
	refusals string
}

var (
	syncOnce  sync.Once
	syncState *syncBench
	syncErr   error
)

// setUpSync creates, once, the controller the dry-run syncs run, and checks
// that composite-apiserver takes a front-proxy client certificate with
// identity headers the way kube-apiserver's aggregator sends them.
func setUpSync(ctx context.Context) (*syncBench, error) {
	syncOnce.Do(func() { syncState, syncErr = newSyncBench(ctx) })
	return syncState, syncErr
}

func newSyncBench(ctx context.Context) (*syncBench, error) {
	s := &syncBench{namespace: "bench-sync", children: *syncChildren}
	if err := suite.CreateNamespace(ctx, s.namespace); err != nil {
		return nil, err
	}
	cc, err := createController(ctx, "bench-sync")
	if err != nil {
		return nil, err
	}
	s.controller = cc
	s.hookURL = env.hook.register(cc.Name) + "/sync"
	s.bareClient = &http.Client{Transport: &http.Transport{
		// As the server's hook client: several workers call one hook.
		MaxIdleConns: 100, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
	}}

	// A client certificate of the front-proxy CA with the name the
	// aggregated server allows, as kube-apiserver's --proxy-client-cert-file.
	cert, err := suite.Certs.Issue(suite.Certs.FrontProxyCA, framework.FrontProxyClientName, nil, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if s.directClient, err = suite.CompositeHTTPClient(&cert); err != nil {
		return nil, err
	}
	s.directURL = suite.CompositeURL() + "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/" + cc.Name + "/sync?dryRun=All"

	// requestheader authentication must be what lets the requests in: the
	// certificate with the headers is admin, the certificate without them
	// or the headers without it are nobody.
	get := suite.CompositeURL() + "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/" + cc.Name
	if code, body, err := s.do(ctx, s.directClient, http.MethodGet, get, nil, true); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("front-proxy certificate with X-Remote-User admin: got %d %s (%v), want 200", code, body, err)
	}
	noHeaders, _, err := s.do(ctx, s.directClient, http.MethodGet, get, nil, false)
	if err != nil || noHeaders == http.StatusOK {
		return nil, fmt.Errorf("front-proxy certificate without identity headers: got %d (%v), want a refusal", noHeaders, err)
	}
	noCert, err := suite.CompositeHTTPClient(nil)
	if err != nil {
		return nil, err
	}
	noCertCode, _, err := s.do(ctx, noCert, http.MethodGet, get, nil, true)
	if err != nil || noCertCode == http.StatusOK {
		return nil, fmt.Errorf("identity headers without the front-proxy certificate: got %d (%v), want a refusal", noCertCode, err)
	}
	s.refusals = fmt.Sprintf("certificate without headers: %d, headers without certificate: %d", noHeaders, noCertCode)
	return s, nil
}

// do sends one request straight to composite-apiserver, with the
// aggregator's identity headers when asIdentity.
func (s *syncBench) do(ctx context.Context, client *http.Client, method, url string, body []byte, asIdentity bool) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if asIdentity {
		req.Header.Set("X-Remote-User", "admin")
		req.Header.Set("X-Remote-Group", "system:masters")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// parent is the inline parent of request i: a Hello that does not exist
// (no uid), so the server reads nothing of the cluster for it and the
// measured work is the hook call plus computing what applying each child
// would store (with -sync.server-dry-run, one dry-run apply per child to
// kube-apiserver).
func (s *syncBench) parent(i int) []byte {
	return s.parentOf(s.controller.Name, i)
}

// parentOf is request i's parent for controller ctrl.
func (s *syncBench) parentOf(ctrl string, i int) []byte {
	data, _ := json.Marshal(newParent(s.namespace, fmt.Sprintf("p%d", i), ctrl, s.children).Object)
	return data
}

func (s *syncBench) syncRequest(i int) *v1alpha1.SyncRequest {
	return s.syncRequestOf(s.controller.Name, i)
}

func (s *syncBench) syncRequestOf(ctrl string, i int) *v1alpha1.SyncRequest {
	return &v1alpha1.SyncRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "SyncRequest"},
		Spec:     v1alpha1.SyncRequestSpec{Parent: &runtime.RawExtension{Raw: s.parentOf(ctrl, i)}, ServerDryRun: *syncServerDryRun},
	}
}

// twoInlinePatches are the patches of B1's patched variant: each adds a
// data key to every ConfigMap, one from a variable, one from a template.
func twoInlinePatches(spec *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
	configMaps := acv1alpha1.PatchSelector().WithAPIVersion("v1").WithKind("ConfigMap")
	add := func(path string, from *acv1alpha1.JSONPatchValueApplyConfiguration) *acv1alpha1.PatchDefinitionApplyConfiguration {
		return acv1alpha1.PatchDefinition().WithSelector(configMaps).
			WithJSONPatches(acv1alpha1.JSONPatch().WithOp(v1alpha1.JSONPatchOpAdd).WithPath(path).WithValueFrom(from))
	}
	spec.Hooks.WithPatches(
		acv1alpha1.PatchHook().WithName("parent-name").WithDefinitions(
			add("/data/parentName", acv1alpha1.JSONPatchValue().WithVariable("builtin.parent.metadata.name"))),
		acv1alpha1.PatchHook().WithName("owner").WithDefinitions(
			add("/data/owner", acv1alpha1.JSONPatchValue().WithTemplate(`"{{ .builtin.parent.metadata.name }}/{{ .builtin.child.name }}"`))))
}

// setUpPatched creates, once, the controller of the patched variant: the
// same hook as direct's, plus twoInlinePatches.
func (s *syncBench) setUpPatched(ctx context.Context) error {
	if s.patched != nil {
		return nil
	}
	cc, err := createControllerWith(ctx, "bench-sync-patches", twoInlinePatches)
	if err != nil {
		return err
	}
	s.patched = cc
	s.patchedURL = suite.CompositeURL() + "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/" + cc.Name + "/sync?dryRun=All"
	return nil
}

// directPatched is direct for the controller with two inline patches, and
// checks that both patches ran on every child.
func (s *syncBench) directPatched(ctx context.Context, i int) error {
	out, err := s.postSync(ctx, s.patchedURL, s.syncRequestOf(s.patched.Name, i))
	if err != nil {
		return err
	}
	if n := len(out.Status.Patches); n != 2 {
		return fmt.Errorf("answer has %d patch steps, want 2", n)
	}
	for _, step := range out.Status.Patches {
		if step.Skipped || len(step.Changes) != s.children {
			return fmt.Errorf("patch %s: skipped %v, %d changes, want %d", step.Name, step.Skipped, len(step.Changes), s.children)
		}
	}
	for _, raw := range out.Status.Children {
		var child struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(raw.Raw, &child); err != nil {
			return err
		}
		if child.Data["parentName"] == "" || child.Data["owner"] == "" {
			return fmt.Errorf("a child was not patched: data %v", child.Data)
		}
	}
	return nil
}

// bare does what the server does around the hook, and nothing else: build
// the hook request (the controller, the parent, an empty ConfigMap group),
// encode it, POST it, decode the answer as the server's webhook client does.
func (s *syncBench) bare(ctx context.Context, i int) error {
	parent := &unstructured.Unstructured{}
	if err := parent.UnmarshalJSON(s.parent(i)); err != nil {
		return err
	}
	children := hookapi.RelativeObjectMap{}
	children.InitGroup("v1", "ConfigMap")
	body, err := json.Marshal(&hookapi.SyncHookRequest{
		Controller: s.controller.DeepCopy(), Parent: parent, Children: children, Related: hookapi.RelativeObjectMap{},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.hookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.bareClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("hook answered %d: %s", resp.StatusCode, data)
	}
	out := &hookapi.SyncHookResponse{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, out); err != nil {
		return err
	}
	if len(out.Children) != s.children {
		return fmt.Errorf("hook returned %d children, want %d", len(out.Children), s.children)
	}
	return nil
}

// direct POSTs the SyncRequest straight to composite-apiserver as
// kube-apiserver's aggregator would.
func (s *syncBench) direct(ctx context.Context, i int) error {
	_, err := s.postSync(ctx, s.directURL, s.syncRequest(i))
	return err
}

// postSync POSTs req to the sync subresource at url straight to
// composite-apiserver, as kube-apiserver's aggregator would, and checks
// the answer did the whole work.
func (s *syncBench) postSync(ctx context.Context, url string, req *v1alpha1.SyncRequest) (*v1alpha1.SyncRequest, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	code, data, err := s.do(ctx, s.directClient, http.MethodPost, url, body, true)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK && code != http.StatusCreated {
		return nil, fmt.Errorf("POST sync answered %d: %s", code, data)
	}
	out := &v1alpha1.SyncRequest{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, s.check(out)
}

// directGet GETs the controller straight from composite-apiserver, as
// kube-apiserver's aggregator would: a request through the same filters
// (authentication of the front-proxy certificate, authorization, priority
// and fairness) whose handler reads the watch cache and encodes one small
// object.
func (s *syncBench) directGet(ctx context.Context, _ int) error {
	url := strings.TrimSuffix(s.directURL, "/sync?dryRun=All")
	code, data, err := s.do(ctx, s.directClient, http.MethodGet, url, nil, true)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s answered %d: %s", url, code, data)
	}
	return nil
}

// throughKube calls the sync subresource through kube-apiserver with the
// generated clientset.
func (s *syncBench) throughKube(ctx context.Context, i int) error {
	out, err := env.cc.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, s.controller.Name, s.syncRequest(i),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	return s.check(out)
}

// check makes sure a sync answer did the whole work: no child fell back
// to the hook's version with a warning, and with -sync.server-dry-run every
// child was dry-run applied by kube-apiserver (it has a uid).
func (s *syncBench) check(out *v1alpha1.SyncRequest) error {
	st := out.Status
	if !st.DryRun || len(st.Children) != s.children || len(st.Plan) != s.children {
		return fmt.Errorf("answer has dryRun=%v, %d children and %d plan items, want true, %d, %d (warnings %q)",
			st.DryRun, len(st.Children), len(st.Plan), s.children, s.children, st.Warnings)
	}
	for _, item := range st.Plan {
		if item.Action != v1alpha1.SyncActionCreate {
			return fmt.Errorf("plan item %s %s is %s, want Create", item.Kind, item.Name, item.Action)
		}
	}
	if len(st.Warnings) > 0 {
		return fmt.Errorf("answer has warnings %q, want none", st.Warnings)
	}
	for _, raw := range st.Children {
		var child struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(raw.Raw, &child); err != nil {
			return err
		}
		if *syncServerDryRun && child.Metadata.UID == "" {
			return fmt.Errorf("child %s was not dry-run applied by kube-apiserver (no uid); warnings %q", child.Metadata.Name, st.Warnings)
		}
	}
	return nil
}

type syncResult struct {
	requests int
	elapsed  time.Duration
	lat      []time.Duration
	// serverCPU is composite-apiserver's CPU time over the requests, when
	// measured.
	serverCPU float64
}

// cpuPerRequest is composite-apiserver's CPU time per request, in ms.
// compositeCPU is composite-apiserver's CPU time so far.
func compositeCPU(b *testing.B) float64 {
	cpu, err := suite.CompositeCPUSeconds()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

func (r syncResult) cpuPerRequest() float64 { return r.serverCPU * 1000 / float64(r.requests) }

func (r syncResult) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// measure runs b.N batches of n requests on the configured concurrency.
func (s *syncBench) measure(b *testing.B, n int, call func(ctx context.Context, i int) error) syncResult {
	ctx := context.Background()
	// Warm connections, caches and the hook client up, and spend the
	// burst of the server's rate limiter of the target cluster, so that
	// what is measured is the steady state; not measured.
	warm := 3 * *syncConcurrency
	if _, err := forEach(ctx, warm, *syncConcurrency, func(ctx context.Context, i int) error { return call(ctx, -1-i) }); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	var res syncResult
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		cpuBefore := compositeCPU(b)
		start := time.Now()
		lat, err := forEach(ctx, n, *syncConcurrency, func(ctx context.Context, i int) error { return call(ctx, it*n+i) })
		res.elapsed += time.Since(start)
		res.serverCPU += compositeCPU(b) - cpuBefore
		if err != nil {
			b.Fatal(err)
		}
		res.requests += n
		res.lat = append(res.lat, lat...)
	}
	b.StopTimer()
	return res
}

func (s *syncBench) report(b *testing.B, name string, r syncResult) {
	sorted := sortedCopy(r.lat)
	p50, p99 := percentile(sorted, 0.5), percentile(sorted, 0.99)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.rps(), "ops/s")
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	line := fmt.Sprintf("%s: %d requests, concurrency %d, %d children each: %.1f req/s, p50 %.1f ms, p99 %.1f ms",
		name, r.requests, *syncConcurrency, s.children, r.rps(), ms(p50), ms(p99))
	if name != "bare" {
		b.ReportMetric(r.cpuPerRequest(), "server-cpu-ms/req")
		line += fmt.Sprintf(", composite-apiserver CPU %.2f ms a request", r.cpuPerRequest())
	}
	if s.bareRPS > 0 && name != "bare" {
		ratio := r.rps() / s.bareRPS
		b.ReportMetric(ratio, "ratio-vs-bare")
		line += fmt.Sprintf(", throughput %.4f× bare (%.1f req/s)", ratio, s.bareRPS)
	}
	if s.directRPS > 0 && name == patchedName {
		ratio := r.rps() / s.directRPS
		b.ReportMetric(ratio, "ratio-vs-direct")
		line += fmt.Sprintf(", %.2f× direct without patches (%.1f req/s)", ratio, s.directRPS)
	}
	b.Log(line)
}

// patchedName is the sub-benchmark of direct with two inline patches.
const patchedName = "direct-two-inline-patches"

// interleavedRounds is how many batches of each call interleaved runs.
const interleavedRounds = 6

// interleaved measures two calls in alternating batches, n requests of each
// per iteration, after warming both up, so that what the machine does
// meanwhile weighs on both alike.
func (s *syncBench) interleaved(b *testing.B, n int, call, baseline func(ctx context.Context, i int) error) (syncResult, syncResult) {
	ctx := context.Background()
	warm := 3 * *syncConcurrency
	for _, c := range []func(ctx context.Context, i int) error{call, baseline} {
		if _, err := forEach(ctx, warm, *syncConcurrency, func(ctx context.Context, i int) error { return c(ctx, -1-i) }); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	batch := max(n/interleavedRounds, *syncConcurrency)
	var res, base syncResult
	run := func(r *syncResult, c func(ctx context.Context, i int) error, offset int) {
		cpuBefore := compositeCPU(b)
		start := time.Now()
		lat, err := forEach(ctx, batch, *syncConcurrency, func(ctx context.Context, i int) error { return c(ctx, offset+i) })
		r.elapsed += time.Since(start)
		r.serverCPU += compositeCPU(b) - cpuBefore
		if err != nil {
			b.Fatal(err)
		}
		r.requests += batch
		r.lat = append(r.lat, lat...)
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for round := 0; round < interleavedRounds; round++ {
			offset := (it*interleavedRounds + round) * batch
			// Alternate which goes first, so that neither always follows
			// the other's garbage.
			if round%2 == 0 {
				run(&res, call, offset)
				run(&base, baseline, offset)
			} else {
				run(&base, baseline, offset)
				run(&res, call, offset)
			}
		}
	}
	b.StopTimer()
	return res, base
}

// ensureBaseline measures the bare baseline when the bare sub-benchmark
// did not run (e.g. -bench DryRunSync/direct).
func (s *syncBench) ensureBaseline(b *testing.B) {
	if s.bareRPS > 0 {
		return
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := forEach(ctx, *syncBareRequests, *syncConcurrency, s.bare); err != nil {
		b.Fatal(err)
	}
	s.bareRPS = float64(*syncBareRequests) / time.Since(start).Seconds()
}

// BenchmarkDryRunSync measures POST compositecontrollers/<cc>/sync?dryRun=All
// with an inline parent (spec.parent, a Hello that does not exist, so no
// cluster reads) whose hook returns 10 ConfigMaps:
//
//   - bare: the hook call alone, encoded and decoded as the server does it
//     (the baseline);
//   - direct: straight to composite-apiserver, authenticated as
//     kube-apiserver's aggregator (front-proxy certificate, X-Remote-*);
//   - through-kube-apiserver: the generated clientset through the
//     aggregator;
//   - direct-two-inline-patches: direct, for a controller with two inline
//     patches (spec.hooks.patches) over the children, against direct.
//
// A server sync also computes what applying each child would store, or,
// with -sync.server-dry-run, asks kube-apiserver by dry-run applying each
// through the server's client of the target cluster.
func BenchmarkDryRunSync(b *testing.B) {
	setUp(b)
	ctx := context.Background()
	s, err := setUpSync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bare", func(b *testing.B) {
		r := s.measure(b, *syncBareRequests, s.bare)
		s.bareRPS = r.rps()
		s.report(b, "bare", r)
	})
	b.Run("direct", func(b *testing.B) {
		b.Logf("direct: requestheader authentication accepts the front-proxy certificate with X-Remote-User admin (200); refused: %s", s.refusals)
		s.ensureBaseline(b)
		r := s.measure(b, *syncServerRequests, s.direct)
		s.directRPS = r.rps()
		s.report(b, "direct", r)
		s.logServerTimings(b, ctx)
		s.profile(b, "direct", s.direct)
	})
	b.Run("direct-get", func(b *testing.B) {
		// The generic API server's request path with next to no work
		// behind it: what any request to composite-apiserver costs, and
		// so how fast a /sync could be at best on this machine.
		s.ensureBaseline(b)
		r := s.measure(b, *syncServerRequests, s.directGet)
		s.report(b, "direct-get", r)
	})
	b.Run(patchedName, func(b *testing.B) {
		if err := s.setUpPatched(ctx); err != nil {
			b.Fatal(err)
		}
		s.ensureBaseline(b)
		// Against direct measured in the same rounds, batch for batch:
		// on a shared machine, two runs a minute apart differ more than
		// the patches cost.
		patched, direct := s.interleaved(b, *syncServerRequests, s.directPatched, s.direct)
		s.directRPS = direct.rps()
		// The server's CPU time per request says what the patches cost
		// it whatever else the machine runs; on a busy machine the rates
		// say less.
		cpuRatio := direct.cpuPerRequest() / patched.cpuPerRequest()
		b.ReportMetric(direct.cpuPerRequest(), "direct-server-cpu-ms/req")
		b.ReportMetric(cpuRatio, "cpu-ratio-vs-direct")
		b.Logf("%s: direct without patches in the same rounds: %d requests, %.1f req/s; composite-apiserver CPU per request %.2f ms with patches, %.2f ms without (%.2f×)",
			patchedName, direct.requests, direct.rps(), patched.cpuPerRequest(), direct.cpuPerRequest(), cpuRatio)
		s.report(b, patchedName, patched)
	})
	b.Run("through-kube-apiserver", func(b *testing.B) {
		s.ensureBaseline(b)
		// What each request costs either server, whatever else the
		// machine runs: the second hop's price is kube-apiserver's.
		kubeBefore, kubeErr := suite.KubeAPIServerCPUSeconds()
		r := s.measure(b, *syncServerRequests, s.throughKube)
		kubeAfter, kubeErr2 := suite.KubeAPIServerCPUSeconds()
		if err := errors.Join(kubeErr, kubeErr2); err != nil {
			b.Logf("through-kube-apiserver: no CPU time of kube-apiserver: %v", err)
		} else {
			kube := (kubeAfter - kubeBefore) * 1000 / float64(r.requests)
			b.ReportMetric(kube, "kube-apiserver-cpu-ms/req")
			b.Logf("through-kube-apiserver: kube-apiserver CPU per request %.2f ms", kube)
		}
		s.report(b, "through-kube-apiserver", r)
		s.profile(b, "through-kube-apiserver", s.throughKube)
	})
}

// logServerTimings logs, for one more request, how the server split its
// time, which says where a slow sync spends it.
func (s *syncBench) logServerTimings(b *testing.B, ctx context.Context) {
	body, err := json.Marshal(s.syncRequest(1 << 30))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	code, data, err := s.do(ctx, s.directClient, http.MethodPost, s.directURL, body, true)
	if err != nil || (code != http.StatusOK && code != http.StatusCreated) {
		b.Fatalf("sync: %d %s %v", code, data, err)
	}
	elapsed := time.Since(start)
	out := &v1alpha1.SyncRequest{}
	if err := json.Unmarshal(data, out); err != nil {
		b.Fatal(err)
	}
	t := out.Status.Timings
	b.Logf("direct: one request alone took %.0f ms: server total %d ms, of which sync hook %d ms (%d children)",
		ms(elapsed), t.TotalMillis, t.SyncHookMillis, s.children)
}

// profile writes composite-apiserver's CPU profile of syncProfileSeconds of
// calls to -sync.cpuprofile/sync-<name>.pprof, when that flag is set, and
// its cumulative allocation profile before and after them to
// sync-<name>-allocs-{before,after}.pprof (compare them with go tool pprof
// -base); through kube-apiserver, also kube-apiserver's CPU profile to
// sync-<name>-kube-apiserver.pprof. It runs after the measurement, so that profiling does not weigh
// on it.
func (s *syncBench) profile(b *testing.B, name string, call func(ctx context.Context, i int) error) {
	dir := *syncCPUProfile
	if dir == "" {
		return
	}
	// The allocations over the same calls: the difference of two
	// readings of the cumulative profile (go tool pprof -base).
	allocsBefore, err := serverGet(context.Background(), "/debug/pprof/allocs")
	if err != nil {
		b.Logf("%s: no allocation profile: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := serverGet(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", syncProfileSeconds))
		done <- result{data, err}
		cancel()
	}()
	// Through kube-apiserver, what the first hop costs is kube-apiserver's
	// own profile over the same calls.
	kubeDone := make(chan result, 1)
	if name == "through-kube-apiserver" {
		go func() {
			data, err := env.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", fmt.Sprint(syncProfileSeconds)).DoRaw(context.Background())
			kubeDone <- result{data, err}
		}()
	} else {
		kubeDone <- result{}
	}
	// Calls until the profile is taken; the error of a call the
	// cancellation cut short means nothing.
	for i := 0; ctx.Err() == nil; i++ {
		if _, err := forEach(ctx, 10**syncConcurrency, *syncConcurrency, func(ctx context.Context, j int) error { return call(ctx, 1<<29+i*1000+j) }); err != nil && ctx.Err() == nil {
			b.Fatalf("%s while profiling: %v", name, err)
		}
	}
	res := <-done
	if res.err == nil {
		res.err = os.WriteFile(filepath.Join(dir, "sync-"+name+".pprof"), res.data, 0o644)
	}
	if res.err != nil {
		b.Logf("%s: no CPU profile: %v", name, res.err)
	}
	if kube := <-kubeDone; kube.data != nil || kube.err != nil {
		err := kube.err
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "sync-"+name+"-kube-apiserver.pprof"), kube.data, 0o644)
		}
		if err != nil {
			b.Logf("%s: no CPU profile of kube-apiserver: %v", name, err)
		}
	}
	if allocsBefore != nil {
		allocsAfter, err := serverGet(context.Background(), "/debug/pprof/allocs")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "sync-"+name+"-allocs-before.pprof"), allocsBefore, 0o644)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "sync-"+name+"-allocs-after.pprof"), allocsAfter, 0o644)
		}
		if err != nil {
			b.Logf("%s: no allocation profile: %v", name, err)
		}
	}
}

// syncProfileSeconds is how long -sync.cpuprofile profiles each variant.
const syncProfileSeconds = 10
