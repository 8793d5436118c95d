// Command kubectl-composite is the kubectl plugin `kubectl composite`:
// preview and run syncs of composite-apiserver's CompositeControllers, and
// print the RBAC they need. Install it on PATH with
//
//	go install ./cmd/kubectl-composite
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/composite-apiserver/composite-apiserver/internal/plugin"
)

func main() {
	// Ctrl-C cancels the request in flight rather than killing the
	// plugin mid-write.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
