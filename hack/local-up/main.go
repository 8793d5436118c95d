// Command local-up starts the end-to-end stack for a person: etcd,
// kube-apiserver, kube-controller-manager and composite-apiserver
// registered as an aggregated API, all on 127.0.0.1, and keeps it up until
// Ctrl-C; with --pods, the pod stack (kube-scheduler, kwok nodes) too. Run
// it through hack/local-up.sh.
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
	devRights := flag.Bool("dev-rights", false, "grant composite-apiserver every verb on every resource, so that any controller runs without "+
		"granting rights per controller; for local experiments only (a real cluster grants them per controller: kubectl composite rbac)")
	pods := flag.Bool("pods", false, "also run pods, as the e2e/pods tests do: kube-scheduler, kube-controller-manager's workload, node and volume "+
		"controllers, kwok (built once by hack/install-kwok.sh) as the kubelet of 3 simulated nodes, and a default StorageClass whose claims bind. "+
		"No container runs: pods become Running and Ready at once, pods of Jobs and pods with restartPolicy Never or OnFailure complete, deleted pods go")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: hack/local-up.sh [--dir DIR] [--dev-rights] [--pods] [-- composite-apiserver flags]\n\n"+
			"Starts etcd, kube-apiserver, kube-controller-manager and composite-apiserver (registered as an APIService) on 127.0.0.1\n"+
			"and keeps them up until Ctrl-C. The first run builds the pinned cluster binaries (minutes); later runs start in seconds.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := framework.Options{Dir: *dir, CompositeArgs: flag.Args(), Log: os.Stderr}
	if *pods {
		opts = framework.WithPods(opts)
	}
	stack, err := framework.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "local-up: %v\n", err)
		os.Exit(1)
	}
	if *devRights {
		if err := stack.Apply(ctx, devRightsRole); err != nil {
			fmt.Fprintf(os.Stderr, "local-up: can't grant the development rights: %v\n", err)
			stack.Stop()
			os.Exit(1)
		}
		fmt.Println("Granted composite-apiserver every verb on every resource (ClusterRole composite-apiserver-dev-rights, " +
			"aggregated into its role): every controller runs without rights of its own. For local experiments only.")
	}
	fmt.Printf(`The stack is up. In another shell:

  export KUBECONFIG=%s
  export PATH=%s:$PATH   # kubectl %s
  kubectl get compositecontrollers

Logs: %s/logs. Press Ctrl-C to stop everything.
`, stack.AdminKubeconfig, dirOf(stack.Bin.Kubectl), "v1.37.2", stack.Dir)
	if *pods {
		fmt.Printf("Pods run on %d kwok nodes (kubectl get nodes): simulated, no container runs.\n", stack.Nodes())
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "local-up: stopping")
	stack.Stop()
}

// devRightsRole joins the server's aggregated ClusterRole (see
// artifacts/deploy/rbac.yaml) with every right there is.
const devRightsRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: composite-apiserver-dev-rights
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
`

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "."
}
