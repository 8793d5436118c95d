package cluster

import (
	"context"
	"strings"
	"testing"
)

// TestRestartKeepsDataAndAvailability restarts composite-apiserver under a
// running kube-apiserver: the APIService goes unavailable and comes back,
// and the objects are intact.
func TestRestartKeepsDataAndAvailability(t *testing.T) {
	// Sequential: it stops and restarts composite-apiserver, which every other test goes through.
	suite.SetUp(t)
	ctx := context.Background()
	const name = "agg-restart"
	if _, stderr, err := kubectlStdin(t, suite.AdminKubeconfig, compositeControllerYAML(name, "restartparents"), "create", "-f", "-"); err != nil {
		t.Fatalf("create: %v: %s", err, stderr)
	}
	uid := mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.metadata.uid}")

	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	if err := suite.WaitAPIServiceAvailable(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := suite.Kubectl(ctx, "get", "cc", name); err == nil {
		t.Errorf("get succeeded while composite-apiserver was down")
	} else if !strings.Contains(stderr, "unavailable") && !strings.Contains(stderr, "503") && !strings.Contains(stderr, "the server is currently unable") {
		t.Logf("get while down said: %s", stderr)
	}

	if err := suite.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.metadata.uid}"); got != uid {
		t.Errorf("after restart uid = %q, want %q", got, uid)
	}
	mustKubectl(t, "delete", "cc", name)
}
