package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/pkg/cmd/server"
)

// ShippedDeployment is artifacts/deploy/deployment.yaml, the Deployment an
// admin installs.
func ShippedDeployment() (*appsv1.Deployment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "artifacts", "deploy", "deployment.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("can't read the shipped Deployment: %w", err)
	}
	return decodeDeployment(path, data)
}

func decodeDeployment(source string, data []byte) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(data, d); err != nil {
		return nil, fmt.Errorf("can't decode %s: %w", source, err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("%s has %d containers, want composite-apiserver's alone", source, len(d.Spec.Template.Spec.Containers))
	}
	return d, nil
}

// ShippedOptions are the server's options as the shipped Deployment's
// arguments set them, read by the server's own command line.
func ShippedOptions() (*server.Options, *appsv1.Deployment, error) {
	d, err := ShippedDeployment()
	if err != nil {
		return nil, nil, err
	}
	o, err := DeploymentOptions(d)
	return o, d, err
}

// DeploymentOptions are the server's options as d's container arguments
// set them, read by the server's own command line.
func DeploymentOptions(d *appsv1.Deployment) (*server.Options, error) {
	o := server.NewOptions(io.Discard, io.Discard)
	if err := server.NewCommand(context.Background(), o).ParseFlags(d.Spec.Template.Spec.Containers[0].Args); err != nil {
		return nil, fmt.Errorf("can't parse the arguments of Deployment %s: %w", d.Name, err)
	}
	return o, nil
}

// stackFlags are the flags that say where a server runs, not how it
// behaves: the stack sets them for each server it starts (StartComposite,
// StartReplica), to its own etcd, port and certificates. The stack's etcd
// serves plain HTTP on loopback, so a Deployment's etcd client certificate
// goes too.
var stackFlags = []string{
	"etcd-servers", "etcd-prefix", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
	"bind-address", "secure-port", "tls-cert-file", "tls-private-key-file",
	"authentication-kubeconfig", "authorization-kubeconfig", "kubeconfig",
}

// ShippedServerArgs are the arguments of the shipped Deployment's container
// without the flags the stack sets itself (stackFlags): what a test passes
// to StartComposite and StartReplica to run the servers as shipped.
func ShippedServerArgs() ([]string, error) {
	d, err := ShippedDeployment()
	if err != nil {
		return nil, err
	}
	return DeploymentServerArgs(d), nil
}

// DeploymentServerArgs are the arguments of d's container without the
// flags the stack sets itself (stackFlags).
func DeploymentServerArgs(d *appsv1.Deployment) []string {
	args := d.Spec.Template.Spec.Containers[0].Args
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !isStackFlag(name) {
			out = append(out, args[i])
			continue
		}
		if !hasValue {
			// "--flag value": the value goes too.
			i++
		}
	}
	return out
}

func isStackFlag(name string) bool {
	for _, f := range stackFlags {
		if f == name {
			return true
		}
	}
	return false
}
