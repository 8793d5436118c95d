package framework

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain runs a package's tests against one stack started with opts,
// stored in *stack for them, and returns the exit code. The stack is torn
// down at the end, also on an interrupt; its files are kept when a test
// failed, for a look.
func TestMain(m *testing.M, opts Options, stack **Stack) int {
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
	*stack = s
	code := 1
	defer func() {
		s.Stop()
		if code == 0 {
			os.RemoveAll(s.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e stack files kept in %s\n", s.Dir)
		}
	}()
	done := make(chan int, 1)
	go func() { done <- m.Run() }()
	select {
	case code = <-done:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "interrupted: stopping the e2e stack")
	}
	return code
}

// DumpLogsOnFailure prints every process's log tail when t fails.
func (s *Stack) DumpLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack logs:\n%s", s.LogTails(6000))
		}
	})
}
