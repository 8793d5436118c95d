package plugin

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	ccclient "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/typed/metacontroller/v1alpha1"
)

// ClientFunc makes the client of a command, for either kind of controller. It is
// called only once the command's own arguments are checked, so that a bad
// file is reported as such even without a kubeconfig.
type ClientFunc func() (ccclient.MetacontrollerV1alpha1Interface, error)

// clientFromFlags is the client of the kubeconfig flags, kubectl's way.
func clientFromFlags(flags *genericclioptions.ConfigFlags, stderr io.Writer) ClientFunc {
	return func() (ccclient.MetacontrollerV1alpha1Interface, error) {
		config, err := flags.ToRESTConfig()
		if err != nil {
			return nil, fmt.Errorf("can't load the kubeconfig: %w", err)
		}
		// The server's warnings (a RollingRecreate updated at once, ...) go
		// to stderr as kubectl prints them, not to klog.
		config.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
		client, err := clientset.NewForConfig(config)
		if err != nil {
			return nil, fmt.Errorf("can't make a client: %w", err)
		}
		return client.MetacontrollerV1alpha1(), nil
	}
}
