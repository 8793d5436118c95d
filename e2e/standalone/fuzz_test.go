package standalone

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Environment of the fuzzed-input test: COMPOSITE_E2E_LONG=1 sends
// longFuzzedBodies mutated bodies instead of fuzzedBodies;
// COMPOSITE_E2E_FUZZ_SEED replays a run (each run logs its seed).
const (
	envLong     = "COMPOSITE_E2E_LONG"
	envFuzzSeed = "COMPOSITE_E2E_FUZZ_SEED"

	fuzzedBodies     = 5000
	longFuzzedBodies = 50000

	// Memory bounds of the server over the whole test, in MiB of resident
	// memory: at its peak (VmHWM, hostile bodies included), and how much
	// more it holds at the end than after warming up (VmRSS). It measured
	// about 125 and 30 (175 and 77 over 50,000 bodies); before bodies were
	// limited to 100 levels of nesting, 30 KiB nested 5,000 deep cost
	// 200 MiB each.
	maxPeakRSSMiB   = 256
	maxRSSGrowthMiB = 128

	// The server's default --request-timeout; a body gets half of it to
	// arrive.
	requestTimeout = 60 * time.Second
)

// TestFuzzedRequestsGetClientErrors sends composite-apiserver, in standalone
// mode with its default flags, what a hostile or broken client would:
// bodies of 3 MiB, 100,000 nested arrays, a YAML alias bomb, bodies
// trickling in a few bytes a second (over HTTP/1.1 and HTTP/2), and
// thousands of random mutations of valid CompositeController and
// SyncRequest bodies (creates, dry-run creates, updates, patches, dry-run
// syncs, with several content types). Every answer must be a 2xx or a 4xx
// Status, never a 5xx; a slow body must be answered 4xx once half the
// request timeout has passed, not held for as long as the client trickles;
// the server must keep serving; and its memory must stay within
// maxPeakRSSMiB at its peak and grow by at most maxRSSGrowthMiB.
func TestFuzzedRequestsGetClientErrors(t *testing.T) {
	t.Parallel()
	// Its own server: its memory is measured, and nothing else's requests
	// are in it.
	s := startServer(t)
	c := newAPIClient(t, s.kubeconfig)
	n := fuzzedBodies
	if os.Getenv(envLong) == "1" {
		n = longFuzzedBodies
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envFuzzSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envFuzzSeed, v, err)
		}
	}
	t.Logf("%d mutated bodies, seed %d (replay with %s=%d)", n, seed, envFuzzSeed, seed)

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Whatever the parent: no children, which is valid for any.
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/customize" {
			_, _ = io.WriteString(w, `{"relatedResources":[]}`)
			return
		}
		_, _ = io.WriteString(w, `{"status":{"synced":true},"children":[]}`)
	}))
	t.Cleanup(hook.Close)
	const target = "fuzz-target"
	validCC := fuzzController(target, hook.URL)
	if r := c.do(t, http.MethodPost, ccPath(""), c.token, "application/json", validCC); r.code != http.StatusCreated {
		t.Fatalf("creating %s: HTTP %d: %s", target, r.code, r.body)
	}
	syncPath := ccPath(target) + "/sync?dryRun=All"
	// Warm up what every request touches, then take the baseline.
	for i := 0; i < 20; i++ {
		if r := c.do(t, http.MethodPost, syncPath, c.token, "application/json", []byte(fuzzSyncRequest)); r.code != http.StatusCreated {
			t.Fatalf("a valid dry-run sync: HTTP %d: %s", r.code, r.body)
		}
	}
	rssBefore := memoryOf(t, s)
	t.Logf("server memory after warming up: RSS %d MiB, peak %d MiB", rssBefore.rss>>20, rssBefore.peak>>20)

	var mu sync.Mutex
	var problems []string
	codes := map[string]map[int]int{}
	record := func(what string, code int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		// Counted by the kind of request, reported with the mutation.
		kind, _, _ := strings.Cut(what, ", ")
		if strings.HasPrefix(what, "slow body") {
			kind = what
		}
		if codes[kind] == nil {
			codes[kind] = map[int]int{}
		}
		codes[kind][code]++
		if code >= 500 || code < 200 || (code >= 300 && code < 400) {
			problems = append(problems, fmt.Sprintf("%s: HTTP %d: %.300s", what, code, body))
		}
	}

	// Bodies trickling in, alongside everything else.
	var slow sync.WaitGroup
	for _, tc := range []struct{ name, path string }{
		{"create", ccPath("")},
		{"sync", syncPath},
	} {
		for _, h2 := range []bool{false, true} {
			slow.Add(1)
			go func() {
				defer slow.Done()
				proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
				what := fmt.Sprintf("slow body, %s, %s", tc.name, proto)
				code, body, elapsed, err := slowRequest(s.kubeconfig, tc.path, h2)
				switch {
				case err != nil:
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: no answer after %s: %v", what, elapsed.Round(time.Millisecond), err))
					mu.Unlock()
				case elapsed > requestTimeout/2+15*time.Second:
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: answered HTTP %d after %s; want an answer once half the request timeout (%s) has passed", what, code, elapsed.Round(time.Millisecond), requestTimeout/2))
					mu.Unlock()
				default:
					t.Logf("%s: HTTP %d after %s: %.200s", what, code, elapsed.Round(time.Millisecond), body)
					if code < 400 {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("%s: HTTP %d; want a 4xx", what, code))
						mu.Unlock()
					}
				}
				record(what, code, body)
			}()
		}
	}

	// Hostile bodies, each once.
	deep := func(prefix, suffix string) []byte {
		return []byte(prefix + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + suffix)
	}
	var bomb strings.Builder
	bomb.WriteString("a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	bigParent := `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p1","namespace":"default"},"spec":{"big":"` + strings.Repeat("x", 3<<20) + `"}}}}`
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            []byte
	}{
		{"3 MiB create", http.MethodPost, ccPath(""), "application/json", bytes.Replace(fuzzController("too-big", hook.URL), []byte(`"metadata":{`), []byte(`"metadata":{"annotations":{"big":"`+strings.Repeat("x", 3<<20)+`"},`), 1)},
		{"3 MiB sync", http.MethodPost, syncPath, "application/json", []byte(bigParent)},
		{"3 MiB sync of a big parent, a little under the limit", http.MethodPost, syncPath, "application/json", []byte(strings.Replace(bigParent, strings.Repeat("x", 3<<20), strings.Repeat("x", 3<<20-1024), 1))},
		{"nested create", http.MethodPost, ccPath(""), "application/json", deep(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"deep"},"spec":`, `}`)},
		{"nested sync", http.MethodPost, syncPath, "application/json", deep(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parent":`, `}}`)},
		{"nested sync children", http.MethodPost, syncPath, "application/json", deep(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p1","namespace":"default"}},"children":`, `}}`)},
		{"nested update", http.MethodPut, ccPath(target), "application/json", deep(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"`+target+`"},"spec":{"parentResource":`, `}}`)},
		{"nested merge patch", http.MethodPatch, ccPath(target), "application/merge-patch+json", deep(`{"spec":{"hooks":`, `}}`)},
		{"YAML alias bomb create", http.MethodPost, ccPath(""), "application/yaml", []byte(bomb.String())},
		{"YAML alias bomb sync", http.MethodPost, syncPath, "application/yaml", []byte(bomb.String())},
	} {
		r := c.do(t, tc.method, tc.path, c.token, tc.contentType, tc.body)
		record(tc.name, r.code, r.body)
		if r.code < 400 && tc.name != "3 MiB sync of a big parent, a little under the limit" {
			problems = append(problems, fmt.Sprintf("%s: HTTP %d, want a 4xx", tc.name, r.code))
		}
	}
	afterHostile := memoryOf(t, s)
	t.Logf("server memory after the hostile bodies: RSS %d MiB, peak %d MiB", afterHostile.rss>>20, afterHostile.peak>>20)

	// Random mutations of valid bodies, on 4 connections at a time.
	start := time.Now()
	var next atomic.Int64
	var created atomic.Int64
	var workers sync.WaitGroup
	for w := 0; w < 4; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || !s.running() {
					return
				}
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				req := fuzzRequest(r, target, hook.URL, validCC)
				resp, err := c.try(req.method, req.path, req.contentType, req.body)
				if err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: no answer: %v", req.what, err))
					mu.Unlock()
					continue
				}
				record(req.what, resp.code, resp.body)
				if resp.code == http.StatusCreated && req.method == http.MethodPost && !strings.Contains(req.path, "dryRun") && !strings.Contains(req.path, "/sync") {
					// A real create: take it away again, so that the
					// store stays small.
					var obj struct {
						Metadata struct{ Name string } `json:"metadata"`
					}
					if err := json.Unmarshal(resp.body, &obj); err == nil && obj.Metadata.Name != "" && obj.Metadata.Name != target {
						created.Add(1)
						if del, err := c.try(http.MethodDelete, ccPath(obj.Metadata.Name), "", nil); err == nil {
							record("delete of a created object", del.code, del.body)
						}
					}
				}
			}
		}()
	}
	workers.Wait()
	elapsed := time.Since(start)
	slow.Wait()

	if !s.running() {
		t.Fatalf("composite-apiserver exited")
	}
	if r := c.do(t, http.MethodGet, "/readyz", c.token, "", nil); r.code != http.StatusOK {
		t.Errorf("/readyz after the fuzzing: HTTP %d: %s", r.code, r.body)
	}
	if r := c.do(t, http.MethodPost, syncPath, c.token, "application/json", []byte(fuzzSyncRequest)); r.code != http.StatusCreated {
		t.Errorf("a valid dry-run sync after the fuzzing: HTTP %d: %s", r.code, r.body)
	}
	if r := c.do(t, http.MethodGet, ccPath(target), c.token, "", nil); r.code != http.StatusOK {
		t.Errorf("GET %s after the fuzzing: HTTP %d: %s", target, r.code, r.body)
	}
	after := memoryOf(t, s)
	t.Logf("%d mutated requests in %s (%.0f/s), %d real creates deleted again; server memory: RSS %d MiB (was %d), peak %d MiB; answers:\n%s",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), created.Load(), after.rss>>20, rssBefore.rss>>20, after.peak>>20, formatCodes(codes))
	for _, p := range problems[:min(len(problems), 30)] {
		t.Error(p)
	}
	if len(problems) > 30 {
		t.Errorf("... and %d more", len(problems)-30)
	}
	if after.peak > maxPeakRSSMiB<<20 {
		t.Errorf("the server's resident memory peaked at %d MiB, over the bound of %d MiB", after.peak>>20, maxPeakRSSMiB)
	}
	if growth := after.rss - rssBefore.rss; growth > maxRSSGrowthMiB<<20 {
		t.Errorf("the server's resident memory grew by %d MiB (%d → %d), over the bound of %d MiB", growth>>20, rssBefore.rss>>20, after.rss>>20, maxRSSGrowthMiB)
	}
}

// try is do for other goroutines than the test's: it returns its error.
func (c *apiClient) try(method, path, contentType string, body []byte) (response, error) {
	req, err := http.NewRequest(method, c.server+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{code: resp.StatusCode, body: data}, nil
}

func formatCodes(codes map[string]map[int]int) string {
	whats := make([]string, 0, len(codes))
	for w := range codes {
		whats = append(whats, w)
	}
	sort.Strings(whats)
	var b strings.Builder
	for _, w := range whats {
		var parts []string
		for code, k := range codes[w] {
			parts = append(parts, fmt.Sprintf("%d ×%d", code, k))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "  %-55s %s\n", w, strings.Join(parts, ", "))
	}
	return b.String()
}

// memory is a process's resident memory now and at its peak, in bytes.
type memory struct{ rss, peak int64 }

// memoryOf reads the server's VmRSS and VmHWM from /proc.
func memoryOf(t *testing.T, s *server) memory {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("can't read the server's memory: %v", err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.peak = kb << 10
		}
	}
	if m.rss == 0 || m.peak == 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", s.cmd.Process.Pid)
	}
	return m
}

// slowRequest POSTs a valid-looking body of 4 KiB at 4 bytes a second (it
// would take 17 minutes), over HTTP/2 or HTTP/1.1, and returns the answer
// and when it came.
func slowRequest(kubeconfig, path string, h2 bool) (code int, body []byte, elapsed time.Duration, err error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return 0, nil, 0, err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	cluster, auth := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cluster.CertificateAuthorityData)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: h2}
	defer transport.CloseIdleConnections()
	// Far longer than the server may take: it must answer by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 3*requestTimeout)
	defer cancel()
	content := []byte(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","metadata":{"name":"slow"},"spec":{"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"slow"},"spec":{"pad":"` + strings.Repeat("x", 4096) + `"}}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cluster.Server, "/")+path, &trickle{data: content, ctx: ctx})
	if err != nil {
		return 0, nil, 0, err
	}
	req.ContentLength = int64(len(content))
	req.Header.Set("Authorization", "Bearer "+auth.Token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	elapsed = time.Since(start)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The server closing the connection on a body it gave up on
			// is a fine answer too.
			return 0, nil, elapsed, fmt.Errorf("connection ended without an answer: %w", err)
		}
		return 0, nil, elapsed, err
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	if h2 && resp.ProtoMajor != 2 {
		return resp.StatusCode, body, elapsed, fmt.Errorf("spoke %s, not HTTP/2", resp.Proto)
	}
	return resp.StatusCode, body, elapsed, nil
}

// trickle reads data at 4 bytes a second.
type trickle struct {
	data []byte
	ctx  context.Context
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	select {
	case <-time.After(time.Second):
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	}
	k := copy(p[:min(len(p), 4)], r.data)
	r.data = r.data[k:]
	return k, nil
}

// fuzzController is a valid CompositeController using most of the spec.
func fuzzController(name, hookURL string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":%q,"labels":{"app":"fuzz"},"annotations":{"note":"fuzzed"}},`+
		`"spec":{"generateSelector":true,"resyncPeriodSeconds":30,"workers":2,`+
		`"parentResource":{"apiVersion":"example.com/v1","resource":"hellos","labelSelector":{"matchLabels":{"app":"fuzz"},"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]}]},"revisionHistory":{"fieldPaths":["spec"]}},`+
		`"childResources":[{"apiVersion":"v1","resource":"configmaps","updateStrategy":{"method":"InPlace"}},{"apiVersion":"v1","resource":"services","updateStrategy":{"method":"RollingRecreate","statusChecks":{"conditions":[{"type":"Ready","status":"True"}]}}}],`+
		`"hooks":{"sync":{"webhook":{"url":"%[2]s/sync","timeout":"5s"}},"finalize":{"webhook":{"url":"%[2]s/finalize","timeout":"10s","responseUnMarshallMode":"strict"}},"customize":{"version":"v2","webhook":{"url":"%[2]s/customize"}}}}}`,
		name, hookURL))
}

// fuzzSyncRequest is a valid dry-run SyncRequest with an inline parent and
// children.
const fuzzSyncRequest = `{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{` +
	`"parent":{"apiVersion":"example.com/v1","kind":"Hello","metadata":{"name":"p1","namespace":"default","uid":"11111111-2222-3333-4444-555555555555","labels":{"app":"fuzz","tier":"a"}},"spec":{"color":"blue","replicas":3,"items":["a","b"]}},` +
	`"children":{"ConfigMap.v1":{"p1-a":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p1-a","namespace":"default","labels":{"controller-uid":"11111111-2222-3333-4444-555555555555"}},"data":{"color":"red"}}}}}}`

// fuzzedRequest is one request of the fuzzer.
type fuzzedRequest struct {
	what, method, path, contentType string
	body                            []byte
}

// fuzzRequest picks a request and mutates its body.
func fuzzRequest(r *rand.Rand, target, hookURL string, validCC []byte) fuzzedRequest {
	var req fuzzedRequest
	switch r.IntN(6) {
	case 0:
		req = fuzzedRequest{what: "create", method: http.MethodPost, path: ccPath(""), body: fuzzController(fmt.Sprintf("fuzz-%d", r.IntN(1000)), hookURL)}
	case 1:
		req = fuzzedRequest{what: "dry-run create", method: http.MethodPost, path: ccPath("") + "?dryRun=All", body: fuzzController(fmt.Sprintf("fuzz-%d", r.IntN(1000)), hookURL)}
	case 2:
		// Updates must not take the sync target away: dry run.
		req = fuzzedRequest{what: "dry-run update", method: http.MethodPut, path: ccPath(target) + "?dryRun=All", body: validCC}
	case 3:
		req = fuzzedRequest{what: "dry-run merge patch", method: http.MethodPatch, path: ccPath(target) + "?dryRun=All", contentType: "application/merge-patch+json",
			body: []byte(`{"metadata":{"labels":{"x":"y"}},"spec":{"workers":3,"hooks":{"sync":{"webhook":{"timeout":"7s"}}}}}`)}
	default:
		req = fuzzedRequest{what: "dry-run sync", method: http.MethodPost, path: ccPath(target) + "/sync?dryRun=All", body: []byte(fuzzSyncRequest)}
	}
	if req.contentType == "" {
		req.contentType = "application/json"
	}
	var how string
	req.body, how = mutateBody(r, req.body)
	req.what += ", " + how
	switch r.IntN(20) {
	case 0:
		req.contentType, req.what = "application/yaml", req.what+", as YAML"
	case 1:
		req.contentType, req.what = "application/vnd.kubernetes.protobuf", req.what+", as protobuf"
	case 2:
		req.contentType, req.what = "text/plain", req.what+", as text"
	}
	return req
}

// mutateBody changes a valid JSON body: bytes flipped, inserted, cut or
// repeated, or one of its values replaced by another type, null, a huge or
// deeply nested value, a number out of range or invalid UTF-8, or a field
// removed or added. It says how.
func mutateBody(r *rand.Rand, body []byte) ([]byte, string) {
	b := append([]byte(nil), body...)
	switch r.IntN(10) {
	case 0:
		k := 1 + r.IntN(8)
		for i := 0; i < k; i++ {
			b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
		}
		return b, fmt.Sprintf("%d bits flipped", k)
	case 1:
		pos, k := r.IntN(len(b)+1), 1+r.IntN(16)
		junk := make([]byte, k)
		for i := range junk {
			junk[i] = byte(r.IntN(256))
		}
		return append(b[:pos:pos], append(junk, body[pos:]...)...), fmt.Sprintf("%d random bytes inserted", k)
	case 2:
		from := r.IntN(len(b))
		to := from + r.IntN(len(b)-from)
		return append(b[:from:from], body[to:]...), fmt.Sprintf("bytes %d-%d cut", from, to)
	case 3:
		from := r.IntN(len(b))
		to := from + r.IntN(len(b)-from)
		return append(b[:to:to], body[from:]...), fmt.Sprintf("bytes %d-%d repeated", from, to)
	case 4:
		cut := r.IntN(len(b))
		return b[:cut], fmt.Sprintf("truncated at %d", cut)
	default:
		return mutateValue(r, body)
	}
}

// mutateValue replaces, removes or adds one value of the JSON body.
func mutateValue(r *rand.Rand, body []byte) ([]byte, string) {
	var doc interface{}
	if err := json.Unmarshal(body, &doc); err != nil {
		panic(err)
	}
	type slot struct {
		path   string
		set    func(interface{})
		remove func()
		obj    map[string]interface{}
	}
	var slots []slot
	var walk func(v interface{}, path string, s slot)
	walk = func(v interface{}, path string, s slot) {
		slots = append(slots, s)
		switch x := v.(type) {
		case map[string]interface{}:
			for k, e := range x {
				walk(e, path+"."+k, slot{path: path + "." + k, set: func(nv interface{}) { x[k] = nv }, remove: func() { delete(x, k) }, obj: x})
			}
		case []interface{}:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", path, i), slot{path: fmt.Sprintf("%s[%d]", path, i), set: func(nv interface{}) { x[i] = nv }})
			}
		}
	}
	walk(doc, "", slot{path: "(the body)"})
	s := slots[1+r.IntN(len(slots)-1)]
	const raw = "@@raw@@"
	var rawValue string
	var how string
	switch k := r.IntN(14); {
	case k == 0 && s.remove != nil:
		s.remove()
		how = "removed"
	case k == 1 && s.obj != nil:
		s.obj["unknownField"+strconv.Itoa(r.IntN(10))] = "surprise"
		how = "an unknown field next to it"
	default:
		values := []interface{}{nil, "", "x", 0, -1, 1.5, true, false, []interface{}{}, map[string]interface{}{}, strings.Repeat("z", 100000),
			[]interface{}{"a", 1, nil}, map[string]interface{}{"a": map[string]interface{}{"b": nil}}, raw, raw, raw, raw}
		v := values[r.IntN(len(values))]
		s.set(v)
		how = fmt.Sprintf("set to %.40v", v)
		if v == raw {
			rawValue = []string{"1e400", "-1e400", "123456789012345678901234567890", "\"\xff\xfe\"", "\"\xc0\x80\"",
				strings.Repeat("[", 20000) + strings.Repeat("]", 20000), strings.Repeat("{\"a\":", 5000) + "1" + strings.Repeat("}", 5000)}[r.IntN(7)]
			how = fmt.Sprintf("set to %.40q", rawValue)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	if rawValue != "" {
		out = bytes.Replace(out, []byte(`"`+raw+`"`), []byte(rawValue), 1)
	}
	return out, s.path + " " + how
}
