package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Binaries are the programs a stack runs.
type Binaries struct {
	Etcd, KubeAPIServer, KubeControllerManager, Kubectl string
	// KubeScheduler runs in the pod stack only (Options.Pods), which
	// checks that it is there.
	KubeScheduler string
	// CompositeAPIServer is built from this checkout.
	CompositeAPIServer string
}

// EnvTestBinaries names a directory holding etcd, kube-apiserver,
// kube-controller-manager, kubectl and kube-scheduler; when unset they are built (or taken
// from the cache) by hack/install-test-binaries.sh.
const EnvTestBinaries = "COMPOSITE_TEST_BINARIES"

var (
	binariesOnce sync.Once
	binaries     Binaries
	binariesErr  error
)

// FindBinaries returns the stack's binaries, building what is missing once
// per test process.
func FindBinaries() (Binaries, error) {
	binariesOnce.Do(func() { binaries, binariesErr = findBinaries() })
	return binaries, binariesErr
}

func findBinaries() (Binaries, error) {
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	dir := os.Getenv(EnvTestBinaries)
	if dir == "" {
		cmd := exec.Command(filepath.Join(root, "hack", "install-test-binaries.sh"))
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return Binaries{}, fmt.Errorf("hack/install-test-binaries.sh failed: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = lines[len(lines)-1]
	}
	b := Binaries{
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Kubectl:               filepath.Join(dir, "kubectl"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
	}
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.Kubectl} {
		if _, err := os.Stat(p); err != nil {
			return Binaries{}, fmt.Errorf("test binary missing (run hack/install-test-binaries.sh): %w", err)
		}
	}
	if b.CompositeAPIServer, err = BuildCompositeAPIServer(); err != nil {
		return Binaries{}, err
	}
	return b, nil
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// BuildCompositeAPIServer builds this checkout's server once per test
// process and returns the binary's path.
func BuildCompositeAPIServer() (string, error) {
	buildOnce.Do(func() { built, buildErr = buildCompositeAPIServer("composite-apiserver") })
	return built, buildErr
}

var (
	pluginOnce  sync.Once
	pluginBuilt string
	pluginErr   error
)

// BuildKubectlPlugin builds this checkout's kubectl-composite once per test
// process and returns the directory holding it, to put first on PATH so
// that the real kubectl finds the plugin.
func BuildKubectlPlugin() (string, error) {
	pluginOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			pluginErr = err
			return
		}
		dir := filepath.Join(root, "_output", "plugin-bin")
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-composite"), "./cmd/kubectl-composite")
		cmd.Dir = root
		if output, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("can't build kubectl-composite: %w\n%s", err, output)
			return
		}
		pluginBuilt = dir
	})
	return pluginBuilt, pluginErr
}

// RepoRoot is the directory of the project's go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("can't find the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the composite-apiserver module")
	}
	return filepath.Dir(gomod), nil
}
