package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

const (
	envLong  = "COMPOSITE_E2E_LONG"
	envSeed  = "COMPOSITE_E2E_CHAOS_SEED"
	children = 3
)

func long() bool { return os.Getenv(envLong) == "1" }

// seeded returns the test's random source, logging its seed.
func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, envSeed, seed)
	return rand.New(rand.NewPCG(seed, seed>>1|1))
}

// clients are the administrator's, with client-side rate limiting off and
// short timeouts: requests made while kube-apiserver is down must fail
// fast and be retried.
type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	cc   clientset.Interface
}

var (
	clientsOnce sync.Once
	clientsErr  error
	c           clients
)

// setUp is the suite's SetUpHellos, with the package's clients made once.
func setUp(t *testing.T) {
	t.Helper()
	suite.SetUpHellos(t)
	clientsOnce.Do(func() {
		cfg := rest.CopyConfig(suite.AdminConfig)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.Timeout = 20 * time.Second
		if c.kube, clientsErr = kubernetes.NewForConfig(cfg); clientsErr != nil {
			return
		}
		if c.dyn, clientsErr = dynamic.NewForConfig(cfg); clientsErr != nil {
			return
		}
		c.cc, clientsErr = clientset.NewForConfig(cfg)
	})
	if clientsErr != nil {
		t.Fatal(clientsErr)
	}
}

// retry calls f until it succeeds, for up to two minutes: the control
// plane may be down for a while.
func retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = f(ctx); last != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w (last error: %v)", what, err, last)
	}
	return nil
}

// hook is the controllers' sync hook, in the test process: a parent with
// spec {children: n, version: v} gets ConfigMaps <parent>-0..n-1 with data
// {version: v, index: i} and status {version: v, children: n}.
type hook struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		h.calls.Add(1)
		return answer(req.Parent), nil
	})))
	t.Cleanup(h.srv.Close)
	return h
}

func answer(parent *unstructured.Unstructured) *hookapi.SyncHookResponse {
	n, _, _ := unstructured.NestedInt64(parent.Object, "spec", "children")
	version, _, _ := unstructured.NestedString(parent.Object, "spec", "version")
	test := parent.GetLabels()["test"]
	resp := &hookapi.SyncHookResponse{Status: map[string]interface{}{"version": version, "children": n}}
	for i := int64(0); i < n; i++ {
		resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{
				"name":   fmt.Sprintf("%s-%d", parent.GetName(), i),
				"labels": map[string]interface{}{"test": test, "parent": parent.GetName()},
			},
			"data": map[string]interface{}{"version": version, "index": strconv.FormatInt(i, 10)},
		}})
	}
	return resp
}

// createController applies a controller of the hellos labelled test=name,
// with ConfigMap children updated in place, and waits until its loop runs.
func createController(t *testing.T, name, hookURL string) {
	t.Helper()
	manifest := framework.ControllerFixture{Name: name, HookURL: hookURL, Timeout: "10s"}.Manifest()
	ctx := context.Background()
	suite.MustApply(t, manifest)
	t.Cleanup(func() {
		_ = c.cc.MetacontrollerV1alpha1().CompositeControllers().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	err := retry(ctx, "CompositeController "+name+" Ready", func(ctx context.Context) error {
		got, err := c.cc.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("not Ready: %v", got.Status.Conditions)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	suite.MustCreateNamespace(t, name)
}

// createParentRetrying creates a Hello of controller test with spec
// {children, version: v1}, retrying until kube-apiserver takes it; an
// AlreadyExists after a retry is a create that went through before its
// answer was lost.
func createParentRetrying(ctx context.Context, ns, name, test string) error {
	parent := framework.NewHello(ns, name, test, map[string]interface{}{"children": int64(children), "version": "v1"})
	return retry(ctx, "create parent "+name, func(ctx context.Context) error {
		_, err := c.dyn.Resource(framework.Hellos).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// bumpVersion changes a parent's spec.version, which the hook copies into
// every child: an update in place.
func bumpVersion(ctx context.Context, ns, name string) error {
	return retry(ctx, "update parent "+name, func(ctx context.Context) error {
		p, err := c.dyn.Resource(framework.Hellos).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		version, _, _ := unstructured.NestedString(p.Object, "spec", "version")
		n, _ := strconv.Atoi(strings.TrimPrefix(version, "v"))
		if err := unstructured.SetNestedField(p.Object, fmt.Sprintf("v%d", n+1), "spec", "version"); err != nil {
			return err
		}
		_, err = c.dyn.Resource(framework.Hellos).Namespace(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// tracker follows a test's children through an informer, which lists and
// watches again across restarts of kube-apiserver, and notes the UID each
// child had when first seen: a child seen later with another UID was
// recreated, and a child seen deleted was deleted. Neither may happen here:
// no parent is deleted, and the hook never drops a child.
type tracker struct {
	mu         sync.Mutex
	firstUID   map[string]types.UID
	violations []string
	stop       chan struct{}
}

func track(t *testing.T, ns, test string) *tracker {
	t.Helper()
	tr := &tracker{firstUID: map[string]types.UID{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "test=" + test }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	seen := func(obj interface{}) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if first, ok := tr.firstUID[cm.Name]; !ok {
			tr.firstUID[cm.Name] = cm.UID
		} else if first != cm.UID {
			tr.violations = append(tr.violations, fmt.Sprintf("%s: ConfigMap %s recreated (UID %s, first seen as %s)", time.Now().Format("15:04:05.000"), cm.Name, cm.UID, first))
			tr.firstUID[cm.Name] = cm.UID
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, cur interface{}) { seen(cur) },
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				tr.mu.Lock()
				tr.violations = append(tr.violations, fmt.Sprintf("%s: ConfigMap %s (UID %s) deleted", time.Now().Format("15:04:05.000"), cm.Name, cm.UID))
				tr.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(tr.stop)
	t.Cleanup(func() { close(tr.stop) })
	if !cache.WaitForCacheSync(tr.stop, inf.HasSynced) {
		t.Fatal("the children's informer did not sync")
	}
	return tr
}

func (tr *tracker) uids() map[string]types.UID {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string]types.UID, len(tr.firstUID))
	for k, v := range tr.firstUID {
		out[k] = v
	}
	return out
}

// count is how many children whose name matches have been seen.
func (tr *tracker) count(match func(name string) bool) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for name := range tr.firstUID {
		if match(name) {
			n++
		}
	}
	return n
}

func (tr *tracker) problems() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.violations...)
}

// waitConverged waits until every parent of test in ns is converged, and
// then checks the children against the tracker: every parent has the
// status of its spec for its generation; exactly its children exist, each
// once, with exactly one controller reference, its own, and the data of its
// spec; and each child has the UID it was first seen with.
func waitConverged(t *testing.T, ns, test string, parents int, tr *tracker, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var last []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if down := suite.Down(); down != nil {
			return false, down
		}
		last = convergenceProblems(ctx, ns, test, parents)
		return len(last) == 0, nil
	})
	if err != nil {
		sort.Strings(last)
		t.Fatalf("not converged %s after the chaos: %d problems, e.g. %v", timeout, len(last), last[:min(len(last), 15)])
	}
	t.Logf("%d parents converged %s after the chaos ended", parents, time.Since(start).Round(100*time.Millisecond))
	cms, err := c.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "test=" + test})
	if err != nil {
		t.Fatal(err)
	}
	// The tracker's own watch went down with kube-apiserver too: let it
	// catch up (its relist reports any UID that changed meanwhile) before
	// holding it to what exists.
	first := tr.uids()
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		first = tr.uids()
		for _, cm := range cms.Items {
			if _, ok := first[cm.Name]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	for _, cm := range cms.Items {
		if uid, ok := first[cm.Name]; !ok {
			t.Errorf("ConfigMap %s was never seen by the tracker", cm.Name)
		} else if uid != cm.UID {
			t.Errorf("ConfigMap %s has UID %s, first seen as %s: it was recreated", cm.Name, cm.UID, uid)
		}
	}
	if len(cms.Items) != parents*children {
		t.Errorf("%d ConfigMaps, want %d", len(cms.Items), parents*children)
	}
	for _, p := range tr.problems() {
		t.Error(p)
	}
}

// convergenceProblems lists what is not yet as it must end up.
func convergenceProblems(ctx context.Context, ns, test string, parents int) []string {
	list, err := c.dyn.Resource(framework.Hellos).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "test=" + test})
	if err != nil {
		return []string{err.Error()}
	}
	cms, err := c.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	if len(list.Items) != parents {
		problems = append(problems, fmt.Sprintf("%d parents, want %d", len(list.Items), parents))
	}
	byController := map[types.UID][]corev1.ConfigMap{}
	for _, cm := range cms.Items {
		controllers := 0
		for _, ref := range cm.OwnerReferences {
			if ref.Controller != nil && *ref.Controller {
				controllers++
				byController[ref.UID] = append(byController[ref.UID], cm)
			}
		}
		if controllers > 1 {
			problems = append(problems, fmt.Sprintf("ConfigMap %s has %d controller references", cm.Name, controllers))
		}
		if controllers == 0 && cm.Labels["test"] == test {
			problems = append(problems, fmt.Sprintf("ConfigMap %s has no controller", cm.Name))
		}
	}
	for _, p := range list.Items {
		name := p.GetName()
		version, _, _ := unstructured.NestedString(p.Object, "spec", "version")
		observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
		statusVersion, _, _ := unstructured.NestedString(p.Object, "status", "version")
		if observed != p.GetGeneration() || statusVersion != version {
			problems = append(problems, fmt.Sprintf("parent %s: generation %d, observedGeneration %d; spec.version %s, status.version %q", name, p.GetGeneration(), observed, version, statusVersion))
		}
		want := map[string]bool{}
		for i := 0; i < children; i++ {
			want[fmt.Sprintf("%s-%d", name, i)] = true
		}
		for _, cm := range byController[p.GetUID()] {
			if !want[cm.Name] {
				problems = append(problems, fmt.Sprintf("parent %s controls ConfigMap %s, which its hook does not ask for", name, cm.Name))
				continue
			}
			delete(want, cm.Name)
			if cm.Data["version"] != version {
				problems = append(problems, fmt.Sprintf("ConfigMap %s has version %q, its parent %s", cm.Name, cm.Data["version"], version))
			}
		}
		for missing := range want {
			problems = append(problems, fmt.Sprintf("parent %s lacks ConfigMap %s", name, missing))
		}
	}
	return problems
}

// holder is the process holding the loop's Lease among replicas, nil when
// none of them does.
func holder(ctx context.Context, replicas ...*replica) (*replica, error) {
	l, err := c.kube.CoordinationV1().Leases(framework.CompositeNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if l.Spec.HolderIdentity == nil {
		return nil, nil
	}
	for _, r := range replicas {
		if p := r.process(); p != nil && strings.Contains(*l.Spec.HolderIdentity, "_"+strconv.Itoa(p.Pid())+"_") {
			if exited, _ := p.Exited(); !exited {
				return r, nil
			}
		}
	}
	return nil, nil
}

// servedAgain checks that the aggregated API is back as a user sees it:
// the APIService Available, and the controller readable through
// kube-apiserver with a status of its current generation.
func servedAgain(t *testing.T, controller string) {
	t.Helper()
	ctx := context.Background()
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		t.Fatal(err)
	}
	err := retry(ctx, "CompositeController "+controller+" through kube-apiserver", func(ctx context.Context) error {
		got, err := c.cc.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, controller, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
