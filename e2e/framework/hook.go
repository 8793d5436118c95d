package framework

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// PythonHook is e2e/hooks/hook.py running as a real HTTP process: a hook
// written in another language than the server, as users write them.
type PythonHook struct {
	// URL is the hook's base URL; its hooks are at /sync, /customize and
	// /finalize.
	URL     string
	cmd     *exec.Cmd
	LogFile string
}

// StartPythonHook starts the hook on a free loopback port, logging to
// logDir/hook.log.
func StartPythonHook(logDir string) (*PythonHook, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(logDir, "hook.log")
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("python3", filepath.Join(root, "e2e", "hooks", "hook.py"), "0")
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("can't start the Python hook (is python3 installed?): %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(log, r)
	}()
	select {
	case line := <-lines:
		var port int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "listening on %d", &port); err != nil {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the Python hook said %q instead of its port", line)
		}
		return &PythonHook{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, LogFile: logFile}, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("the Python hook did not start within 30s")
	}
}

// SetMode switches how the hook answers: ok, error500, timeout, garbage,
// undeclared, othernamespace, throttle, etag. Every call counted (Calls,
// Times) after SetMode returns is answered in the new mode.
func (h *PythonHook) SetMode(mode string) error {
	resp, err := http.Post(h.URL+"/mode", "application/json", bytes.NewBufferString(`{"mode":"`+mode+`"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("setting the hook's mode: %s", resp.Status)
	}
	return nil
}

// Calls returns how many times each path was called, and each path for
// each parent ("/sync ns/name").
func (h *PythonHook) Calls() (map[string]int, error) {
	calls := map[string]int{}
	return calls, h.get("/calls", &calls)
}

// Times returns when each call came, in Unix seconds, in the order the
// calls came, with the keys of Calls.
func (h *PythonHook) Times() (map[string][]float64, error) {
	times := map[string][]float64{}
	return times, h.get("/times", &times)
}

func (h *PythonHook) get(path string, into interface{}) error {
	resp, err := http.Get(h.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s of the hook: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// Stop ends the hook.
func (h *PythonHook) Stop() {
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}
