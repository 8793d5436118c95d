package standalone

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// serverPackage is the command under test, built once per test run.
const serverPackage = "github.com/composite-apiserver/composite-apiserver/cmd/composite-apiserver"

// requireKubectlEnv, set to 1 (as CI does), turns a missing kubectl from a
// skip into a failure, so that the suite cannot silently stop running.
const requireKubectlEnv = "COMPOSITE_E2E_REQUIRE_KUBECTL"

var (
	// skipReason, when set, is why every test of the package skips.
	skipReason string
	// kubectlPath is the real kubectl the tests drive the server with.
	kubectlPath string
	// serverBinary is the composite-apiserver built by TestMain.
	serverBinary string
	// workDir holds the binary, the shared server's data and kubectl's
	// cache; it is removed when the tests end.
	workDir string
	// kubectlCacheDir keeps kubectl's discovery cache out of $HOME.
	kubectlCacheDir string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv(requireKubectlEnv) == "1" {
			fmt.Fprintf(os.Stderr, "FAIL: kubectl is not on PATH (%v), and %s=1 requires it\n", err, requireKubectlEnv)
			return 1
		}
		skipReason = "kubectl is not on PATH: these end-to-end tests drive composite-apiserver with the real kubectl. " +
			"Install kubectl to run them (set " + requireKubectlEnv + "=1 to fail instead of skipping)."
		fmt.Fprintln(os.Stderr, "SKIP: "+skipReason)
		return m.Run()
	}
	kubectlPath = path

	workDir, err = os.MkdirTemp("", "composite-apiserver-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: can't create a work directory: %v\n", err)
		return 1
	}
	defer os.RemoveAll(workDir)
	kubectlCacheDir = filepath.Join(workDir, "kubectl-cache")

	serverBinary = filepath.Join(workDir, "composite-apiserver")
	if runtime.GOOS == "windows" {
		serverBinary += ".exe"
	}
	if err := buildServer(serverBinary); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}

	code := m.Run()
	if err := stopSharedServer(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the shared composite-apiserver did not stop cleanly: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// buildServer builds the real composite-apiserver binary. go test puts its
// own go first on PATH, so this is the toolchain running the tests.
func buildServer(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("can't find the go command to build %s: %w", serverPackage, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, serverPackage)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", serverPackage, err, output)
	}
	fmt.Fprintf(os.Stderr, "built %s in %s\n", serverPackage, time.Since(start).Round(time.Millisecond))
	return nil
}

// requireE2E skips the test when the suite can't run here.
func requireE2E(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// shared is one server that every test which does not restart or stop a
// server uses, each with its own object names. Starting a server takes a
// few seconds; sharing it keeps the suite fast.
var shared struct {
	once sync.Once
	srv  *server
	err  error
}

// sharedServer returns the shared server, starting it on first use. If the
// test fails, what the server logged while it ran is added to its log.
func sharedServer(t *testing.T) *server {
	t.Helper()
	requireE2E(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp(workDir, "shared-")
		if err != nil {
			shared.err = err
			return
		}
		shared.srv, shared.err = launch(filepath.Join(dir, "data"), 0)
	})
	if shared.err != nil {
		t.Fatalf("can't start the shared composite-apiserver: %v", shared.err)
	}
	s := shared.srv
	mark := s.out.len()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("composite-apiserver output while %s ran:\n%s", t.Name(), orNothing(s.out.since(mark)))
		}
	})
	return s
}

func stopSharedServer() error {
	if shared.srv == nil {
		return nil
	}
	if err := shared.srv.stop(); err != nil {
		return fmt.Errorf("%w; its output:\n%s", err, shared.srv.out.String())
	}
	return nil
}
