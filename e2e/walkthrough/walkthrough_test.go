// Package walkthrough runs docs/getting-started.md's "Try the loop" walkthrough command
// for command, as a new user would: hack/local-up.sh in one shell, the
// exports it prints and the doc's commands in another. In the same cluster
// it then runs the blocks of docs/ marked <!-- run:NAME --> (docblocks_test.go,
// docs_test.go), so that a doc whose commands drift from the code fails.
package walkthrough

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// walkthroughDoc is the page whose walkthrough the test runs: the one a new
// user is sent to from the README.
const walkthroughDoc = "docs/getting-started.md"

// blocks returns the sh code blocks between the walkthrough markers.
func blocks(t *testing.T, doc string) []string {
	t.Helper()
	begin := strings.Index(doc, "<!-- walkthrough:begin -->")
	end := strings.Index(doc, "<!-- walkthrough:end -->")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no walkthrough markers", walkthroughDoc)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc[begin:end], -1) {
		out = append(out, m[1])
	}
	if len(out) != 2 {
		t.Fatalf("the walkthrough has %d sh blocks, want 2 (the stack, then the commands)", len(out))
	}
	return out
}

// shell runs script with bash in the repository, in a process group of its
// own so that what it leaves in the background is stopped with it.
func shell(root, script string) *exec.Cmd {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func stopGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil && os.Getenv("COMPOSITE_E2E_REQUIRE_KUBECTL") == "" {
		t.Skip("kubectl is not on PATH")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(walkthroughDoc)))
	if err != nil {
		t.Fatal(err)
	}
	steps := blocks(t, string(doc))
	dir := regexp.MustCompile(`--dir (\S+)`).FindStringSubmatch(steps[0])
	if dir == nil {
		t.Fatal("the walkthrough's local-up has no --dir")
	}
	_ = os.RemoveAll(dir[1])

	// Shell 1: the stack.
	up := shell(root, steps[0])
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upErr bytes.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		// Ctrl-C, as the doc says; local-up stops the stack in order.
		stopGroup(up, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			stopGroup(up, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("local-up stderr (tail):\n%s", tail(upErr.String(), 4000))
		}
	})
	var exports []string
	var printed strings.Builder
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		up := false
		for sc.Scan() {
			line := sc.Text()
			printed.WriteString(line + "\n")
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "export ") {
				exports = append(exports, strings.TrimSpace(strings.SplitN(l, "#", 2)[0]))
			}
			if strings.Contains(line, "kubectl get compositecontrollers") && !up {
				up = true
				ready <- true
			}
		}
		if !up {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("local-up ended before the stack was up:\n%s", printed.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("local-up did not say the stack was up in 5 minutes:\n%s", printed.String())
	}
	if !strings.Contains(printed.String(), "Granted composite-apiserver every verb on every resource") {
		t.Errorf("local-up --dev-rights did not say what it granted:\n%s", printed.String())
	}
	if len(exports) != 2 {
		t.Fatalf("local-up printed exports %q, want KUBECONFIG and PATH", exports)
	}

	// Shell 2: the exports, then the doc's commands, failing on the
	// first that fails.
	out := runCommandsLeavingBackground(t, root, exports, steps[1])
	if !strings.HasSuffix(strings.TrimSpace(out), "Hello, world") {
		t.Errorf("the last command printed %q, want the greeting Hello, world", out)
	}

	// The patches example, in the same cluster: its README's commands.
	t.Run("patches example", func(t *testing.T) {
		readme, err := os.ReadFile(filepath.Join(root, "artifacts", "examples", "patches", "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		commands := exampleCommands(t, string(readme))
		t.Cleanup(func() {
			if t.Failed() {
				state := runCommands(t, root, exports, "kubectl get events -A || true\nkubectl get cc greeting -o yaml || true\nkubectl get greetings,configmaps -A -o yaml || true\n")
				t.Logf("the cluster's state:\n%s", tail(state, 8000))
			}
		})
		out := runCommands(t, root, exports, commands)
		if want := "blue greeting generation 1: HELLO, PATCHES"; !strings.HasSuffix(strings.TrimSpace(out), "\n"+want) {
			t.Errorf("the example's last command printed %q, want %q", out, want)
		}
	})

	// The other docs' marked blocks, in the same cluster, after the
	// walkthrough: its hello example converged and its hook running.
	t.Run("docs' blocks", func(t *testing.T) { runDocsBlocks(t, root, exports) })
}

// exampleCommands returns the sh block between an example README's
// markers: the commands to run once the stack is up.
func exampleCommands(t *testing.T, readme string) string {
	t.Helper()
	begin := strings.Index(readme, "<!-- example:begin -->")
	end := strings.Index(readme, "<!-- example:end -->")
	if begin < 0 || end < begin {
		t.Fatal("the example's README has no example markers")
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readme[begin:end])
	if m == nil {
		t.Fatal("the example's README has no sh block between its markers")
	}
	return m[1]
}

// runCommands runs commands in a shell of their own after the exports,
// failing on the first that fails, and returns what they printed. What
// they leave in the background (a hook) is stopped when they are done.
func runCommands(t *testing.T, root string, exports []string, commands string) string {
	t.Helper()
	return commandsIn(t, root, exports, commands, false)
}

// runCommandsLeavingBackground is runCommands leaving what the commands
// started in the background (a hook) running until t ends, as it runs for
// a user who goes on in the same shell: the docs' blocks after the
// walkthrough take the walkthrough's hook as they find it.
func runCommandsLeavingBackground(t *testing.T, root string, exports []string, commands string) string {
	t.Helper()
	return commandsIn(t, root, exports, commands, true)
}

func commandsIn(t *testing.T, root string, exports []string, commands string, leave bool) string {
	t.Helper()
	script := "set -e\n" + strings.Join(exports, "\n") + "\n" + commands
	out, errOut, stop, err := runScript(root, script, 6*time.Minute)
	if leave {
		t.Cleanup(stop)
	} else {
		stop()
	}
	if err != nil {
		t.Fatalf("the commands failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, tail(errOut, 4000))
	}
	return out
}

// runScript runs script with bash in dir and returns what it printed once
// bash has exited (or been killed after timeout), and a func that stops
// what the script left in the background.
func runScript(dir, script string, timeout time.Duration) (stdout, stderr string, stop func(), err error) {
	run := shell(dir, script)
	// Files, not pipes: a hook the script leaves in the background keeps
	// its output open, and Wait would wait for it.
	tmp, err := os.MkdirTemp("", "walkthrough-script")
	if err != nil {
		return "", "", func() {}, err
	}
	defer os.RemoveAll(tmp)
	outFile, err := os.Create(filepath.Join(tmp, "stdout"))
	if err != nil {
		return "", "", func() {}, err
	}
	defer outFile.Close()
	errFile, err := os.Create(filepath.Join(tmp, "stderr"))
	if err != nil {
		return "", "", func() {}, err
	}
	defer errFile.Close()
	run.Stdout, run.Stderr = outFile, errFile
	if err := run.Start(); err != nil {
		return "", "", func() {}, err
	}
	// The group outlives bash when the script starts something with &
	// (`go run` and the program it built are both in it).
	stop = func() { stopGroup(run, syscall.SIGKILL) }
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case err = <-done:
	case <-ctx.Done():
		stopGroup(run, syscall.SIGKILL)
		<-done
		err = fmt.Errorf("timed out after %v", timeout)
	}
	out, _ := os.ReadFile(outFile.Name())
	errOut, _ := os.ReadFile(errFile.Name())
	return string(out), string(errOut), stop, err
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
