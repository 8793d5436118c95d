// Package loop holds end-to-end tests of the embedded controller loop:
// CompositeControllers with real HTTP hooks (in Python) running against a
// real kube-apiserver, kube-controller-manager (for garbage collection) and
// composite-apiserver registered as an aggregated API. One stack is shared
// by the package's tests; each test uses namespaces and names of its own.
package loop

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var stack *framework.Stack

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// An interrupt still tears the stack down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	stack, err = framework.Start(ctx, framework.Options{Log: os.Stderr, CompositeArgs: []string{"--workers=5", "-v=2"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "can't start the e2e stack: %v\n", err)
		return 1
	}
	code := 1
	defer func() {
		stack.Stop()
		// Keep certificates, data and logs of a failed run for a look.
		if code == 0 {
			os.RemoveAll(stack.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e stack files kept in %s\n", stack.Dir)
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

// dumpLogsOnFailure prints every process's log tail when t fails.
func dumpLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack logs:\n%s", stack.LogTails(6000))
		}
	})
}
