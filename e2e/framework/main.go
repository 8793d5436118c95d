package framework

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// testMain runs a package's tests against one stack started with opts,
// given to ready before they run, and returns the exit code. The stack is
// torn down at the end, also on an interrupt; its files are kept when a
// test failed, for a look. A stack process that ended without being asked
// to (composite-apiserver crashing or exiting with an error, say) fails the
// package even when every test passed.
func testMain(m *testing.M, opts Options, ready func(*Stack) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	s, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "can't start the e2e stack: %v\n", err)
		return 1
	}
	code := 1
	defer func() {
		s.Stop()
		if code == 0 {
			os.RemoveAll(s.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e stack files kept in %s\n", s.Dir)
		}
	}()
	if err := ready(s); err != nil {
		fmt.Fprintf(os.Stderr, "can't set up the e2e suite: %v\n", err)
		return code
	}
	done := make(chan int, 1)
	go func() { done <- m.Run() }()
	select {
	case code = <-done:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "interrupted: stopping the e2e stack")
	}
	if lines, err := s.ControllerManagerErrors(); err != nil || len(lines) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: kube-controller-manager's log names our group in errors (%v); with the server installed the cluster's controllers must work with our resources:\n%s\n",
			err, strings.Join(lines, "\n"))
		fmt.Println("FAIL")
		code = 1
	}
	if exits := s.UnexpectedExits(); len(exits) > 0 {
		for _, e := range exits {
			fmt.Fprintf(os.Stderr, "FAIL: a stack process ended without being asked to: %s\n", e)
		}
		fmt.Println("FAIL")
		code = 1
	}
	return code
}

// DumpLogsOnFailure prints every process's log tail when t fails, and fails
// t when a stack process ended without being asked to while it ran.
func (s *Stack) DumpLogsOnFailure(t testing.TB) {
	seen := len(s.UnexpectedExits())
	t.Cleanup(func() {
		for _, e := range s.UnexpectedExits()[seen:] {
			t.Errorf("a stack process ended without being asked to: %s", e)
		}
		if t.Failed() {
			t.Logf("stack logs:\n%s", s.LogTails(6000))
		}
	})
}
