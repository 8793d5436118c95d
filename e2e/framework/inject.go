package framework

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// InjectTag builds a composite-apiserver whose parent loop panics on each
// sync of a parent annotated e2e.composite.metacontroller.k8s.io/panic:
// "true" (internal/controller/parentloop/inject_e2e.go). The shipped binary has
// no such switch.
const InjectTag = "e2einject"

var (
	injectOnce  sync.Once
	injectBuilt string
	injectErr   error
)

// BuildInjectingCompositeAPIServer builds this checkout's server with
// InjectTag once per test process and returns the binary's path, beside
// and apart from the one BuildCompositeAPIServer builds.
func BuildInjectingCompositeAPIServer() (string, error) {
	injectOnce.Do(func() {
		injectBuilt, injectErr = buildCompositeAPIServer("composite-apiserver-"+InjectTag, InjectTag)
	})
	return injectBuilt, injectErr
}

// buildCompositeAPIServer builds ./cmd/composite-apiserver with tags into
// _output/bin/name and returns its path.
func buildCompositeAPIServer(name string, tags ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "_output", "bin", name)
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/composite-apiserver")...)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("can't build %s: %w\n%s", name, err, output)
	}
	return out, nil
}

// UseCompositeBinary makes StartComposite run bin from its next call on,
// for a test that restarts the stack's server as another build; it returns
// the binary run until now, to put back when the test ends.
func (s *Stack) UseCompositeBinary(bin string) (previous string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous, s.Bin.CompositeAPIServer = s.Bin.CompositeAPIServer, bin
	return previous
}
