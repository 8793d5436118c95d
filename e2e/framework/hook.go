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
	port, err := StartListening(cmd, log, "the Python hook (is python3 installed?)")
	if err != nil {
		return nil, err
	}
	return &PythonHook{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, LogFile: logFile}, nil
}

// StartListening starts cmd, a hook server whose first line of output is
// "listening on PORT", and answers the port. The rest of its output, and
// its errors, go to log; it dies with the test process.
func StartListening(cmd *exec.Cmd, log *os.File, what string) (int, error) {
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("can't start %s: %w", what, err)
	}
	// Lines before "listening on" (a server's own start-up messages) go
	// to the log; so does everything after it.
	ports := make(chan int, 1)
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			var port int
			if _, scanErr := fmt.Sscanf(strings.TrimSpace(line), "listening on %d", &port); scanErr == nil {
				ports <- port
				break
			}
			_, _ = io.WriteString(log, line)
			if err != nil {
				close(ports)
				return
			}
		}
		_, _ = io.Copy(log, r)
	}()
	select {
	case port, ok := <-ports:
		if !ok {
			_ = cmd.Process.Kill()
			return 0, fmt.Errorf("%s ended its output without saying its port (its log: %s)", what, log.Name())
		}
		return port, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("%s did not start within 30s (its log: %s)", what, log.Name())
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
