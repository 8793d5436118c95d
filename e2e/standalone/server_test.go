package standalone

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

const (
	// readyTimeout is how long a server may take to print its ready line.
	readyTimeout = 60 * time.Second
	// stopTimeout is how long a server may take to exit after SIGTERM
	// before it is killed.
	stopTimeout = 20 * time.Second
	// kubectlTimeout bounds every kubectl run.
	kubectlTimeout = 60 * time.Second
)

// readyLine is what the server prints on stdout once it answers /readyz.
var readyLine = regexp.MustCompile(`composite-apiserver is ready\. Use it with:\n\s*export KUBECONFIG=(\S+)\n`)

// server is a composite-apiserver process running in standalone mode.
type server struct {
	dataDir    string
	port       int
	kubeconfig string // as printed in the ready line

	cmd     *exec.Cmd
	out     *output
	exited  chan struct{}
	exitErr error // set before exited is closed

	stopOnce sync.Once
	stopErr  error
}

// startServer starts a server of its own for t, on a fresh data directory
// and a free port, and stops it when t ends.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerIn(t, t.TempDir(), 0)
}

// startServerIn starts a server for t on dataDir and port (0: a free one),
// and stops it when t ends. If t fails, the server's output is logged.
func startServerIn(t *testing.T, dataDir string, port int) *server {
	t.Helper()
	requireE2E(t)
	s, err := launch(dataDir, port)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: stop, then show the output,
	// shutdown included.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("composite-apiserver output (data dir %s, port %d):\n%s", s.dataDir, s.port, orNothing(s.out.String()))
		}
	})
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("stopping composite-apiserver: %v", err)
		}
	})
	return s
}

// errPortInUse is a start that failed because the port was taken between
// finding it free and the server binding it.
var errPortInUse = errors.New("port in use")

// launch starts a server and waits for its ready line. With port 0 it picks
// a free port, and tries another if that one is taken meanwhile.
func launch(dataDir string, port int) (*server, error) {
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = framework.FreePort(); err != nil {
				return nil, err
			}
		}
		s, err := startProcess(dataDir, p)
		if err == nil {
			return s, nil
		}
		if port != 0 || attempt == 3 || !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
}

func startProcess(dataDir string, port int) (*server, error) {
	absDataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	out := newOutput()
	cmd := exec.Command(serverBinary, "--standalone", "--data-dir", absDataDir, "--secure-port", strconv.Itoa(port))
	cmd.Stdout = out.writer(true)
	cmd.Stderr = out.writer(false)
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("can't start %s: %w", serverBinary, err)
	}
	s := &server{dataDir: absDataDir, port: port, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-out.ready:
	case <-s.exited:
		err := fmt.Errorf("composite-apiserver exited before it was ready (%v); its output:\n%s", s.exitErr, out.String())
		if strings.Contains(out.String(), "address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, err
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-s.exited
		return nil, fmt.Errorf("composite-apiserver did not print its ready line within %s; its output:\n%s", readyTimeout, out.String())
	}

	s.kubeconfig = out.announcedKubeconfig()
	if want := filepath.Join(absDataDir, "kubeconfig"); s.kubeconfig != want {
		stopErr := s.stop()
		return nil, fmt.Errorf("the ready line names kubeconfig %q, want %q (stop: %v); output:\n%s", s.kubeconfig, want, stopErr, out.String())
	}
	return s, nil
}

// running reports whether the process has not exited.
func (s *server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the server to exit, killing it after
// stopTimeout. It is an error for the server to have exited on its own
// before, to exit with a failure, or to need killing. Only the first call
// stops; later ones return the same result.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if !s.running() {
			s.stopErr = fmt.Errorf("composite-apiserver had already exited before it was stopped: %v", s.exitErr)
			return
		}
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("can't send SIGTERM (%v); killed it", err)
			return
		}
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-s.exited:
			if s.exitErr != nil {
				s.stopErr = fmt.Errorf("composite-apiserver exited with %v after SIGTERM", s.exitErr)
			}
		case <-timer.C:
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("composite-apiserver did not exit within %s of SIGTERM; killed it", stopTimeout)
		}
	})
	return s.stopErr
}

// kubectl runs the real kubectl against s, with the kubeconfig the server
// wrote.
func (s *server) kubectl(args ...string) (stdout, stderr string, err error) {
	return runKubectl(s.kubeconfig, args...)
}

// mustKubectl runs kubectl against s and fails t if it fails.
func (s *server) mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := s.kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), err, stderr, stdout)
	}
	return stdout
}

// runKubectl runs kubectl with KUBECONFIG set to kubeconfig.
func runKubectl(kubeconfig string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	var outBuf, errBuf bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectlPath, args...)
	cmd.Env = kubectlEnv(kubeconfig)
	cmd.Stdout = &outBuf
	cmd.Stderr = &errBuf
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("kubectl did not finish within %s: %w", kubectlTimeout, err)
	}
	return outBuf.String(), errBuf.String(), err
}

// kubectlEnv is the environment of a kubectl run: the caller's, with only
// kubeconfig as configuration and the discovery cache kept in workDir.
func kubectlEnv(kubeconfig string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "KUBECACHEDIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+kubectlCacheDir)
}

// output collects what a server writes, stdout and stderr interleaved, and
// notices the ready line on stdout.
type output struct {
	mu         sync.Mutex
	all        bytes.Buffer
	stdout     bytes.Buffer
	ready      chan struct{}
	kubeconfig string
}

func newOutput() *output { return &output{ready: make(chan struct{})} }

type outputWriter struct {
	o      *output
	stdout bool
}

func (o *output) writer(stdout bool) io.Writer { return outputWriter{o, stdout} }

func (w outputWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all.Write(p)
	if w.stdout {
		o.stdout.Write(p)
		if o.kubeconfig == "" {
			if m := readyLine.FindSubmatch(o.stdout.Bytes()); m != nil {
				o.kubeconfig = string(m[1])
				close(o.ready)
			}
		}
	}
	return len(p), nil
}

func (o *output) announcedKubeconfig() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kubeconfig
}

func (o *output) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all.Len()
}

func (o *output) since(mark int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.all.Bytes()[mark:])
}

func (o *output) String() string { return o.since(0) }

// orNothing says so when a server wrote nothing.
func orNothing(out string) string {
	if out == "" {
		return "(nothing)"
	}
	return out
}

// nameSeq numbers object names, so that tests sharing a server, or run
// again with -count, never meet each other's objects.
var nameSeq atomic.Int64

// uniqueName is base with a number no other call in this run gets.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, nameSeq.Add(1))
}

// writeManifest writes a manifest, or any file kubectl reads with -f (a
// request for create --raw), to a file of its own and returns its path.
func writeManifest(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ccManifest is a valid CompositeController named name whose sync hook is
// syncURL, plus extraSpec: YAML lines indented as fields of spec.
func ccManifest(name, syncURL, extraSpec string) string {
	return ccHead(name) + fmt.Sprintf(`  - apiVersion: v1
    resource: configmaps
  hooks:
    sync:
      webhook:
        url: %s
%s`, syncURL, extraSpec)
}

// ccHead is a CompositeController named name of the hellos, up to the
// items of its childResources.
func ccHead(name string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource:
    apiVersion: example.com/v1
    resource: hellos
  childResources:
`, name)
}

// table is kubectl's human-readable output: a header and rows of cells by
// column name.
type table struct {
	columns []string
	rows    []map[string]string
}

// columnSeparator separates header names; names themselves ("SYNC HOOK")
// have single spaces.
var columnSeparator = regexp.MustCompile(`\s{2,}`)

// parseTable reads kubectl's column-aligned output. Cells are cut at the
// offsets of the header names, so that empty cells (an empty MESSAGE) and
// cells with spaces are read right.
func parseTable(t *testing.T, out string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		t.Fatalf("no table in kubectl output:\n%s", out)
	}
	header := lines[0]
	var tbl table
	var starts []int
	pos := 0
	for _, name := range columnSeparator.Split(strings.TrimSpace(header), -1) {
		i := strings.Index(header[pos:], name)
		if i < 0 {
			t.Fatalf("can't find column %q in header %q", name, header)
		}
		tbl.columns = append(tbl.columns, name)
		starts = append(starts, pos+i)
		pos += i + len(name)
	}
	for _, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		row := map[string]string{}
		for i, name := range tbl.columns {
			start, end := starts[i], len(line)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			if start < end {
				row[name] = strings.TrimSpace(line[start:end])
			} else {
				row[name] = ""
			}
		}
		tbl.rows = append(tbl.rows, row)
	}
	return tbl
}

// row returns the row whose NAME is name, failing t if there is none.
func (tbl table) row(t *testing.T, name string) map[string]string {
	t.Helper()
	for _, r := range tbl.rows {
		if r["NAME"] == name {
			return r
		}
	}
	t.Fatalf("no row named %q in %v", name, tbl.rows)
	return nil
}

// apiClient talks HTTPS to a server as the kubeconfig says, trusting only
// the kubeconfig's CA; the token is chosen per request.
type apiClient struct {
	server string
	token  string // the kubeconfig's
	http   *http.Client
}

func newAPIClient(t *testing.T, kubeconfig string) *apiClient {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("can't load kubeconfig %s: %v", kubeconfig, err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("kubeconfig %s has no current context %q", kubeconfig, cfg.CurrentContext)
	}
	cluster, auth := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if cluster == nil || auth == nil {
		t.Fatalf("kubeconfig %s: context %q names a missing cluster or user", kubeconfig, cfg.CurrentContext)
	}
	if auth.Token == "" {
		t.Fatalf("kubeconfig %s has no token", kubeconfig)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cluster.CertificateAuthorityData) {
		t.Fatalf("kubeconfig %s has no usable certificate-authority-data", kubeconfig)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(transport.CloseIdleConnections)
	return &apiClient{
		server: strings.TrimRight(cluster.Server, "/"),
		token:  auth.Token,
		http:   &http.Client{Transport: transport, Timeout: 30 * time.Second},
	}
}

// response is an HTTP answer, read whole.
type response struct {
	code int
	body []byte
}

// do sends a request with "Authorization: Bearer token", or none when token
// is empty.
func (c *apiClient) do(t *testing.T, method, path, token, contentType string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, c.server+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, body: data}
}

// apiStatus is a metav1.Status, as far as the tests look at it.
type apiStatus struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Code    int    `json:"code"`
}

// status decodes the body as a Status, failing t if it is not one.
func (r response) status(t *testing.T) apiStatus {
	t.Helper()
	var st apiStatus
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("HTTP %d body is not a Status (%v): %.500s", r.code, err, r.body)
	}
	return st
}

// dryRunSync POSTs body to the dry-run sync of the CompositeController
// name, with the kubeconfig's token.
func (c *apiClient) dryRunSync(t *testing.T, name, body string) response {
	t.Helper()
	return c.do(t, http.MethodPost, ccPath(name)+"/sync?dryRun=All", c.token, "application/json", []byte(body))
}

// ccPath is the REST path of the compositecontrollers collection, or of one
// of them.
func ccPath(name string) string {
	p := "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers"
	if name != "" {
		p += "/" + name
	}
	return p
}
