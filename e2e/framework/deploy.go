package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kubectlresource "k8s.io/kubectl/pkg/util/resource"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/internal/cmd/server"
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
// goes too. The stack registers its own APIService, for its own server, so
// a Deployment's registration goes as well.
var stackFlags = []string{
	"etcd-servers", "etcd-prefix", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
	"bind-address", "secure-port", "tls-cert-file", "tls-private-key-file",
	"authentication-kubeconfig", "authorization-kubeconfig", "kubeconfig",
	"register-apiservice", "apiservice-service-namespace", "apiservice-service-name", "apiservice-service-port",
	"apiservice-ca-file", "apiservice-owner-clusterrolebinding", "apiservice-group-priority-minimum", "apiservice-version-priority",
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
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			// "--flag value": the value goes too (a boolean flag has none).
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

// SubstituteSecretMounts writes the data of every Secret that d's container
// mounts and that objs hold (the objects rendered with d) under dir, one
// directory per volume, and returns d's arguments with each mount path
// replaced by its directory: the Deployment's arguments with its paths
// substituted, for a server started outside a cluster.
func SubstituteSecretMounts(d *appsv1.Deployment, objs []Object, dir string) ([]string, error) {
	secrets := map[string]map[string][]byte{}
	for _, o := range objs {
		if o.Kind != "Secret" {
			continue
		}
		var s corev1.Secret
		if err := yaml.UnmarshalStrict([]byte(o.YAML), &s); err != nil {
			return nil, fmt.Errorf("can't decode Secret %s: %w", o.Name, err)
		}
		secrets[s.Name] = s.Data
	}
	volumes := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			volumes[v.Name] = v.Secret.SecretName
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	var pairs []string
	for _, m := range c.VolumeMounts {
		data, ok := secrets[volumes[m.Name]]
		if !ok {
			continue
		}
		local := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		for k, v := range data {
			if err := os.WriteFile(filepath.Join(local, k), v, 0o600); err != nil {
				return nil, err
			}
		}
		pairs = append(pairs, strings.TrimSuffix(m.MountPath, "/")+"/", local+"/")
	}
	replacer := strings.NewReplacer(pairs...)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = replacer.Replace(a)
	}
	return args, nil
}

// ContainerEnvVar is the value the kubelet would give d's container for
// its environment variable name: a plain value, or a resourceFieldRef of
// the downward API resolved against the container's own requests and
// limits, as the kubelet resolves it (kubectl's copy of its code). It is
// an error when d does not set name, or sets it from anything else.
func ContainerEnvVar(d *appsv1.Deployment, name string) (string, error) {
	c := &d.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			return e.Value, nil
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			if ref.ContainerName != "" && ref.ContainerName != c.Name {
				return "", fmt.Errorf("Deployment %s: $%s refers to the resources of container %q, not of %q", d.Name, name, ref.ContainerName, c.Name)
			}
			return kubectlresource.ExtractContainerResourceValue(ref, c)
		default:
			return "", fmt.Errorf("Deployment %s: $%s is set from neither a value nor a resourceFieldRef", d.Name, name)
		}
	}
	return "", fmt.Errorf("Deployment %s does not set $%s in container %s's environment", d.Name, name, c.Name)
}
