package install

import (
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// chartDir is the repository's chart, failing t if it is not found.
func chartDir(t *testing.T) string {
	t.Helper()
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return chart
}

// helm runs the real helm against the stack as the administrator.
func helm(args ...string) (string, error) {
	return framework.HelmAgainst(suite.AdminKubeconfig, args...)
}

// mustHelm is helm failing t, with helm's output, when it fails.
func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// uninstall runs helm uninstall of release, waiting a minute at the most
// for its objects to go.
func uninstall(release, namespace string) (string, error) {
	return helm("uninstall", release, "-n", namespace, "--wait", "--timeout=60s")
}
