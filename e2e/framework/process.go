package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Process is one binary of a stack, its output kept in a log file.
type Process struct {
	Name    string
	LogFile string
	// URL is where the process serves, when the stack knows it (replicas).
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// deliberate is set by Stop and Kill before they signal the process:
	// an exit without it is a crash the stack reports.
	deliberate atomic.Bool
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// UnexpectedExit returns, once the process has ended without Stop or Kill
// having asked it to, how it ended; nil otherwise.
func (p *Process) UnexpectedExit() error {
	exited, err := p.Exited()
	if !exited || p.deliberate.Load() {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%s (pid %d) exited on its own with status 0", p.Name, p.Pid())
	}
	return fmt.Errorf("%s (pid %d) exited unexpectedly: %v", p.Name, p.Pid(), err)
}

// CPUSeconds is the CPU time (user and system) the process has used, read
// from /proc: benchmarks report where the work went, in CPU-seconds.
func (p *Process) CPUSeconds() (float64, error) {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0, fmt.Errorf("no process")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which may hold spaces, start
	// after its closing parenthesis; utime and stime are the 14th and 15th.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("can't read /proc/%d/stat", p.cmd.Process.Pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("can't read /proc/%d/stat", p.cmd.Process.Pid)
	}
	// Clock ticks: 100 a second on Linux.
	return (utime + stime) / 100, nil
}

// StartProcess starts bin with args, its stdout and stderr appended to
// logDir/name.log.
func StartProcess(name, logDir, bin string, args ...string) (*Process, error) {
	logFile := fmt.Sprintf("%s/%s.log", logDir, name)
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "\n===== %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the test process dies without cleaning up, take the stack with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("can't start %s: %w", name, err)
	}
	p := &Process{Name: name, LogFile: logFile, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited tells whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop asks the process to end (SIGTERM) and waits for it; past grace it
// is killed.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	p.deliberate.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s and was killed", p.Name, grace)
	}
}

// Kill ends the process at once (SIGKILL), as a crash would.
func (p *Process) Kill() {
	if exited, _ := p.Exited(); exited {
		return
	}
	p.deliberate.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Tail returns the last n bytes of the process's log.
func (p *Process) Tail(n int64) string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		return err.Error()
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}
