package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// Hellos is the resource of HelloCRD, the parents of most e2e controllers.
var Hellos = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}

// Suite is what one e2e package's tests share: the stack its TestMain
// started (embedded: suite.Kube, suite.Kubectl, suite.StartReplica...), the
// administrator's clients, and fixtures of a test's own (a namespace, a
// hook, a controller) that go when the test ends, as kubernetes'
// test/e2e/framework gives each test a client and a fresh namespace. A
// package declares one and runs its tests through it:
//
//	var suite = framework.NewSuite(framework.Options{...})
//
//	func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
type Suite struct {
	*Stack
	// Dynamic and Client are the administrator's dynamic client and
	// generated clientset, made once the stack is up.
	Dynamic dynamic.Interface
	Client  clientset.Interface
	// Timeout is how long Eventually waits.
	Timeout time.Duration

	opts Options

	hellosOnce sync.Once
	hellosErr  error

	// namespaceRuns counts the namespaces asked for by name (Namespace).
	namespaceRunsMu sync.Mutex
	namespaceRuns   map[string]int
}

// NewSuite is a suite whose stack Main starts with opts.
func NewSuite(opts Options) *Suite {
	return &Suite{opts: opts, Timeout: time.Minute, namespaceRuns: map[string]int{}}
}

// Main starts the stack, runs the package's tests against it and returns
// the exit code (see TestMain).
func (s *Suite) Main(m *testing.M) int {
	return testMain(m, s.opts, func(stack *Stack) (err error) {
		s.Stack = stack
		if s.Dynamic, err = dynamic.NewForConfig(stack.AdminConfig); err != nil {
			return err
		}
		s.Client, err = clientset.NewForConfig(stack.AdminConfig)
		return err
	})
}

// SetUp prints the stack's logs when t fails, and fails t when a stack
// process ended without being asked to while it ran.
func (s *Suite) SetUp(t testing.TB) {
	t.Helper()
	s.DumpLogsOnFailure(t)
}

// SetUpHellos is SetUp, with HelloCRD and HelloControllerRights installed
// once for the package.
func (s *Suite) SetUpHellos(t testing.TB) {
	t.Helper()
	s.hellosOnce.Do(func() { s.hellosErr = s.InstallHellos(context.Background()) })
	if s.hellosErr != nil {
		t.Fatal(s.hellosErr)
	}
	s.SetUp(t)
}

// Eventually polls cond for up to the suite's Timeout (Stack.Within).
func (s *Suite) Eventually(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	s.Within(t, what, s.Timeout, cond)
}

// Hook starts a Python hook (e2e/hooks/hook.py) of the test's own, so that
// breaking it on purpose touches no other test; its log is shown when t
// fails, and it stops when t ends.
func (s *Suite) Hook(t testing.TB) *PythonHook {
	t.Helper()
	hook, err := StartPythonHook(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(hook.LogFile)
			t.Logf("hook log (tail):\n%s", Tail(string(data), 3000))
		}
		hook.Stop()
	})
	return hook
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Namespace creates a namespace of the test's own, name the first time and
// name-2, name-3... on later runs of the test in this process (go test
// -count), and deletes it, without waiting, when the test ends: a run never
// finds a former run's objects, nor does a controller of the same name in a
// later run count them as its own.
func (s *Suite) Namespace(t testing.TB, name string) string {
	t.Helper()
	s.namespaceRunsMu.Lock()
	s.namespaceRuns[name]++
	if n := s.namespaceRuns[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	s.namespaceRunsMu.Unlock()
	if err := s.CreateNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// NewHello is a Hello named ns/name labelled test=<selectedBy> (none when
// empty) with spec, changed by mods.
func NewHello(ns, name, selectedBy string, spec map[string]interface{}, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	if selectedBy != "" {
		parent.SetLabels(map[string]string{"test": selectedBy})
	}
	for _, mod := range mods {
		mod(parent)
	}
	return parent
}

// WithLabels sets a Hello's labels (a mod of NewHello).
func WithLabels(labels map[string]string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { u.SetLabels(labels) }
}

// CreateHello creates NewHello(ns, name, selectedBy, spec, mods...): a
// parent of the controller that selects test=<selectedBy>.
func (s *Suite) CreateHello(t testing.TB, ns, name, selectedBy string, spec map[string]interface{}, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	created, err := s.Dynamic.Resource(Hellos).Namespace(ns).Create(context.Background(), NewHello(ns, name, selectedBy, spec, mods...), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create parent %s/%s: %v", ns, name, err)
	}
	return created
}

// GetHello reads the Hello ns/name.
func (s *Suite) GetHello(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	p, err := s.Dynamic.Resource(Hellos).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// RestartWith runs the stack's composite-apiserver with extra flags for the
// rest of t, and as before after it. Each time it waits until kube-apiserver
// proxies to the server again: the aggregator marks the APIService
// unavailable while the server is down, and answers 503 until it has
// checked it again. A test that restarts the server must not be parallel.
func (s *Suite) RestartWith(t testing.TB, args ...string) {
	t.Helper()
	if err := s.Restart(args...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Restart(); err != nil {
			t.Error(err)
		}
	})
}

// Restart stops the stack's composite-apiserver and starts it with its
// usual flags and args, and waits until kube-apiserver proxies to it again.
func (s *Suite) Restart(args ...string) error {
	ctx := context.Background()
	if err := s.StopComposite(); err != nil {
		return err
	}
	if err := s.StartComposite(ctx, args...); err != nil {
		return err
	}
	if err := s.WaitAPIServiceAvailable(ctx, true); err != nil {
		return err
	}
	return s.WaitAuthenticatedRequests(ctx)
}

// CompositeGet GETs path of composite-apiserver as kube-apiserver's
// aggregator would, for an administrator, with kube-apiserver's own
// front-proxy client certificate: issuing a new one would rewrite the
// files kube-apiserver reads, and client-go would drop its connections
// mid-test.
func (s *Suite) CompositeGet(t testing.TB, path string) string {
	t.Helper()
	cert := s.Certs.FrontProxyClient
	client, err := s.CompositeHTTPClient(&cert)
	if err != nil {
		t.Fatal(err)
	}
	// A connection left open would stay open on the server too, and
	// count among its goroutines and heap.
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, s.CompositeURL()+path, nil)
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, data)
	}
	return string(data)
}
