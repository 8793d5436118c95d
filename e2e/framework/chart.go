package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// EnvHelm names the helm binary to use; when unset, hack/install-helm.sh
// builds the pinned one (or takes it from its cache).
const EnvHelm = "COMPOSITE_HELM"

// EnvEtcdClients names a directory holding etcdctl and etcdutl; when
// unset, hack/install-etcd-clients.sh builds the pinned ones.
const EnvEtcdClients = "COMPOSITE_ETCD_CLIENTS"

var (
	helmOnce, etcdClientsOnce sync.Once
	helmPath, etcdClientsDir  string
	helmErr, etcdClientsErr   error
)

// FindHelm returns the pinned helm, built once per test process.
func FindHelm() (string, error) {
	helmOnce.Do(func() {
		if p := os.Getenv(EnvHelm); p != "" {
			helmPath = p
			return
		}
		var dir string
		dir, helmErr = runInstallScript("install-helm.sh")
		helmPath = filepath.Join(dir, "helm")
	})
	return helmPath, helmErr
}

// FindEtcdClients returns the directory of the pinned etcdctl and
// etcdutl, built once per test process.
func FindEtcdClients() (string, error) {
	etcdClientsOnce.Do(func() {
		if etcdClientsDir = os.Getenv(EnvEtcdClients); etcdClientsDir != "" {
			return
		}
		etcdClientsDir, etcdClientsErr = runInstallScript("install-etcd-clients.sh")
	})
	return etcdClientsDir, etcdClientsErr
}

// runInstallScript runs hack/<script> and returns the directory it prints
// on its last line.
func runInstallScript(script string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", script))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s failed: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}

// ChartDir is artifacts/chart/composite-apiserver.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "artifacts", "chart", "composite-apiserver"), nil
}

// ChartModes are the chart's CI values files (ci/*-values.yaml) by mode
// name, and "default" (no file): every way the chart is checked.
func ChartModes() (map[string]string, error) {
	dir, err := ChartDir()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "ci", "*-values.yaml"))
	if err != nil {
		return nil, err
	}
	modes := map[string]string{"default": ""}
	for _, f := range files {
		modes[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = f
	}
	return modes, nil
}

// Helm runs the pinned helm with args and returns its stdout; an error
// carries its stderr.
func Helm(args ...string) (string, error) {
	return helmWithKubeconfig("", args...)
}

// HelmAgainst runs the pinned helm on the cluster of kubeconfig.
func HelmAgainst(kubeconfig string, args ...string) (string, error) {
	return helmWithKubeconfig(kubeconfig, args...)
}

func helmWithKubeconfig(kubeconfig string, args ...string) (string, error) {
	helm, err := FindHelm()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(helm, args...)
	if kubeconfig != "" {
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// RenderChart renders the chart as `helm install` would into namespace,
// with valuesFile (none when empty) and --set values.
func RenderChart(namespace, valuesFile string, set ...string) (string, error) {
	dir, err := ChartDir()
	if err != nil {
		return "", err
	}
	args := []string{"template", "composite-apiserver", dir, "--namespace", namespace}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return Helm(args...)
}

// RenderChartAgainst renders the chart as `helm upgrade` would against the
// cluster of kubeconfig (helm template --dry-run=server): the chart's
// lookups see what the cluster holds.
func RenderChartAgainst(kubeconfig, namespace, valuesFile string, set ...string) (string, error) {
	dir, err := ChartDir()
	if err != nil {
		return "", err
	}
	args := []string{"template", "composite-apiserver", dir, "--namespace", namespace, "--dry-run=server"}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helmWithKubeconfig(kubeconfig, args...)
}

// Object is one rendered manifest: its kind, name and the document.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	YAML                              string
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// SplitManifests splits rendered YAML into its objects, skipping empty
// documents, sorted by kind and name.
func SplitManifests(rendered string) ([]Object, error) {
	var out []Object
	for _, doc := range docSeparator.Split(rendered, -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("can't read a rendered document: %w\n%s", err, doc)
		}
		if head.Kind == "" {
			continue
		}
		out = append(out, Object{APIVersion: head.APIVersion, Kind: head.Kind, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name, YAML: doc})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// ChartDeployment is the composite-apiserver Deployment the chart renders
// into namespace with valuesFile and --set values.
func ChartDeployment(namespace, valuesFile string, set ...string) (*appsv1.Deployment, error) {
	rendered, err := RenderChart(namespace, valuesFile, set...)
	if err != nil {
		return nil, err
	}
	objs, err := SplitManifests(rendered)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.Kind == "Deployment" {
			return decodeDeployment("the chart's Deployment", []byte(o.YAML))
		}
	}
	return nil, fmt.Errorf("the chart renders no Deployment")
}
