package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

var (
	hellos = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}

	setUpOnce sync.Once
	setUpErr  error
	dyn       dynamic.Interface
	cc        clientset.Interface
)

// setUp installs the parent CRD and the controller's rights once.
func setUp(t *testing.T) {
	t.Helper()
	setUpOnce.Do(func() {
		if setUpErr = stack.InstallHellos(context.Background()); setUpErr != nil {
			return
		}
		if dyn, setUpErr = dynamic.NewForConfig(stack.AdminConfig); setUpErr != nil {
			return
		}
		cc, setUpErr = clientset.NewForConfig(stack.AdminConfig)
	})
	if setUpErr != nil {
		t.Fatal(setUpErr)
	}
	stack.DumpLogsOnFailure(t)
}

// eventually polls cond for up to timeout; it gives up at once when the
// stack is down.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	stack.Eventually(t, what, timeout, cond)
}

func createParent(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec":     map[string]interface{}{"greeting": "hello"},
	}}
	u.SetLabels(labels)
	if _, err := dyn.Resource(hellos).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// revisions are the revision each parent's ConfigMap names, by parent name.
func revisions(t *testing.T, ns string) map[string]string {
	t.Helper()
	list, err := stack.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
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
	eventually(t, "each parent's ConfigMap naming its revision", timeout, func() (bool, error) {
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
	eventually(t, "a "+reason+" Event on "+name, 3*time.Minute, func() (bool, error) {
		list, err := stack.Kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
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
	cmd := exec.CommandContext(ctx, stack.Bin.Kubectl, args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+stack.AdminKubeconfig)
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
	if err := restartComposite(); err != nil {
		t.Fatal(err)
	}
}

// restartComposite stops the stack's composite-apiserver and starts it
// with its usual flags and args.
func restartComposite(args ...string) error {
	ctx := context.Background()
	if err := stack.StopComposite(); err != nil {
		return err
	}
	if err := stack.StartComposite(ctx, args...); err != nil {
		return err
	}
	if err := stack.WaitAPIServiceAvailable(ctx, true); err != nil {
		return err
	}
	return stack.WaitAuthenticatedRequests(ctx)
}
