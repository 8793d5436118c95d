// Command local-up starts the end-to-end stack for a person: etcd,
// kube-apiserver, kube-controller-manager and composite-apiserver
// registered as an aggregated API, all on 127.0.0.1, and keeps it up until
// Ctrl-C. Run it through hack/local-up.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

func main() {
	dir := flag.String("dir", "", "directory for certificates, data and logs (default: a new temporary directory)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	stack, err := framework.Start(ctx, framework.Options{Dir: *dir, CompositeArgs: flag.Args(), Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "local-up: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf(`The stack is up. In another shell:

  export KUBECONFIG=%s
  export PATH=%s:$PATH   # kubectl %s
  kubectl get compositecontrollers

Logs: %s/logs. Press Ctrl-C to stop everything.
`, stack.AdminKubeconfig, dirOf(stack.Bin.Kubectl), "v1.37.2", stack.Dir)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "local-up: stopping")
	stack.Stop()
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "."
}
