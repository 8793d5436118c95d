package standalone

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

func TestRestartOnSameDataDirKeepsObjectsAndCredentials(t *testing.T) {
	t.Parallel()
	first := startServer(t)
	dataDir := first.dataDir
	name := uniqueName("survives-restart")
	first.mustKubectl(t, "create", "-f", writeManifest(t, ccManifest(name, "http://hello.example.com/sync", "")))
	uid := first.mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.metadata.uid}")
	if uid == "" {
		t.Fatal("the created object has no uid")
	}

	// Keep the kubeconfig of the first run where the second can't rewrite
	// it: that is the file users have.
	oldKubeconfig, err := os.ReadFile(first.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	savedKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(savedKubeconfig, oldKubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	oldToken := framework.ReadFile(t, filepath.Join(dataDir, "token"))

	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first server: %v", err)
	}
	if stdout, _, err := runKubectl(savedKubeconfig, "get", "cc", "--request-timeout=5s"); err == nil {
		t.Fatalf("kubectl still reaches a server after it stopped:\n%s", stdout)
	}

	// Same data dir and port: the old kubeconfig's address.
	second := startServerIn(t, dataDir, first.port)
	if token := framework.ReadFile(t, filepath.Join(dataDir, "token")); !bytes.Equal(token, oldToken) {
		t.Errorf("the token changed across the restart")
	}
	if newKubeconfig := framework.ReadFile(t, second.kubeconfig); !bytes.Equal(newKubeconfig, oldKubeconfig) {
		t.Errorf("the kubeconfig written after the restart differs from the first one: its token, CA or address changed")
	}

	stdout, stderr, err := runKubectl(savedKubeconfig, "get", "cc", name, "-o", "jsonpath={.metadata.uid} {.spec.hooks.sync.webhook.url}")
	if err != nil {
		t.Fatalf("the first run's kubeconfig does not work after the restart: %v\n%s", err, stderr)
	}
	if want := uid + " http://hello.example.com/sync"; stdout != want {
		t.Errorf("after the restart the object reads %q, want %q", stdout, want)
	}
}
