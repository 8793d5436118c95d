package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// revisions are the revision each parent's ConfigMap names, by parent name.
func revisions(t *testing.T, ns string) map[string]string {
	t.Helper()
	list, err := suite.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		if r, ok := c.Data["revision"]; ok {
			out[c.Name] = r
		}
	}
	return out
}

// waitRevisions waits until each parent's ConfigMap names want(parent).
func waitRevisions(t *testing.T, ns string, parents []string, want func(parent string) string, timeout time.Duration) {
	t.Helper()
	suite.Within(t, "each parent's ConfigMap naming its revision", timeout, func() (bool, error) {
		got := revisions(t, ns)
		for _, p := range parents {
			if got[p] != want(p) {
				return false, fmt.Errorf("%s's ConfigMap names revision %q, want %q", p, got[p], want(p))
			}
		}
		return true, nil
	})
}

// controllerEvent waits for an Event of reason on the CompositeController
// name whose message contains substring, recorded after since.
func controllerEvent(t *testing.T, name, reason, substring string, since time.Time) {
	t.Helper()
	suite.Within(t, "a "+reason+" Event on "+name, 3*time.Minute, func() (bool, error) {
		list, err := suite.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			last := e.LastTimestamp.Time
			if e.EventTime.After(last) {
				last = e.EventTime.Time
			}
			if strings.Contains(e.Message, substring) && !last.Before(since.Truncate(time.Second)) {
				return true, nil
			}
		}
		return false, nil
	})
}

type pluginResult struct {
	code           int
	stdout, stderr string
}

// kubectlComposite runs `kubectl composite args...` as the administrator:
// the real kubectl finds the plugin, built from this checkout, on PATH.
func kubectlComposite(t *testing.T, args ...string) pluginResult {
	t.Helper()
	dir, err := framework.BuildKubectlPlugin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append([]string{"composite"}, args...)
	cmd := exec.CommandContext(ctx, suite.Bin.Kubectl, args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+suite.AdminKubeconfig)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	r := pluginResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// restart stops and starts the stack's composite-apiserver, and waits
// until kube-apiserver proxies to it again.
func restart(t *testing.T) {
	t.Helper()
	if err := suite.Restart(); err != nil {
		t.Fatal(err)
	}
}

// serveHTTP serves h on a port of its own on the loopback until t ends and
// returns its base URL: the hooks the controllers call.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}
