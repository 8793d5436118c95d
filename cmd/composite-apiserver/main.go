// Command composite-apiserver serves Metacontroller's CompositeController
// as an aggregated Kubernetes API. See --help.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/composite-apiserver/composite-apiserver/internal/cmd/server"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	cmd := server.NewCommand(ctx, server.NewOptions(os.Stdout, os.Stderr))
	os.Exit(cli.Run(cmd))
}
