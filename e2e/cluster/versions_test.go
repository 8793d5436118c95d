package cluster

import (
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestServesWritesOnEverySupportedMinor runs on whichever kube-apiserver
// the stack has (CI runs this package on the newest and the oldest
// supported minor): a cluster that does not serve MutatingAdmissionPolicy's
// admissionregistration.k8s.io/v1 (before 1.36) gets the server with that
// plugin turned off and one log line naming it, and writes are served
// either way (on main, before the plugin was turned off, every write on
// 1.34 got 403 "not yet ready to handle request").
func TestServesWritesOnEverySupportedMinor(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	version, err := suite.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	resources, err := suite.Kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	servesMAP := false
	if resources != nil {
		for _, r := range resources.APIResources {
			servesMAP = servesMAP || r.Name == "mutatingadmissionpolicies"
		}
	}
	t.Logf("kube-apiserver %s, serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicies: %v", version.GitVersion, servesMAP)

	// A write through the aggregator, and its delete.
	const name = "versions-write"
	if _, stderr, err := kubectlStdin(t, suite.AdminKubeconfig, compositeControllerYAML(name, "versionsparents"), "create", "-f", "-"); err != nil {
		t.Fatalf("a write on kube-apiserver %s: %v\n%s", version.GitVersion, err, stderr)
	}
	mustKubectl(t, "delete", "compositecontroller", name)

	log, err := os.ReadFile(suite.CompositeProcess().LogFile)
	if err != nil {
		t.Fatal(err)
	}
	turnedOff := false
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "Admission plugin turned off") && strings.Contains(line, `plugin="MutatingAdmissionPolicy"`) {
			turnedOff = true
			t.Logf("server log: %s", line)
		}
	}
	if turnedOff == servesMAP {
		t.Errorf("MutatingAdmissionPolicy turned off: %v, on a cluster that serves its API: %v", turnedOff, servesMAP)
	}
}
