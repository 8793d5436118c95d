// Package gke holds end-to-end tests through a kube-apiserver that limits
// Pods of the critical priority classes as GKE's does: admitted only
// within a ResourceQuota scoped to their class (kube-apiserver's
// ResourceQuota admission with limitedResources). Its own stack, since
// that limit would refuse such Pods in every other test's namespaces.
package gke

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite *framework.Suite

// admissionConfig is the limit GKE runs with, as Kubernetes documents it
// ("Limit Priority Class consumption by default").
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ResourceQuotaConfiguration
    limitedResources:
    - resource: pods
      matchScopes:
      - scopeName: PriorityClass
        operator: In
        values: [system-node-critical, system-cluster-critical]
`

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "composite-e2e-gke-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(config, []byte(admissionConfig), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite = framework.NewSuite(framework.Options{
		// The API alone: no controller is synced here.
		CompositeArgs:     []string{"--controller-loop=false"},
		KubeAPIServerArgs: []string{"--admission-control-config-file=" + config},
	})
	return suite.Main(m)
}
