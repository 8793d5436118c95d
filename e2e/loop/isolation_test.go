package loop

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHangingHookDoesNotHoldOtherControllersBack: while the hook of one
// controller hangs until its timeout for every one of its parents, every
// worker of that controller stuck in a call, another controller's parents
// converge all the same. (How much slower, if at all, is measured by
// e2e/bench's BenchmarkIsolation.)
func TestHangingHookDoesNotHoldOtherControllersBack(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	ns := suite.Namespace(t, "loop-isolation")

	var calls, inFlight atomic.Int64
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		inFlight.Add(1)
		defer inFlight.Add(-1)
		// Until the server gives up on the call.
		<-r.Context().Done()
	}))
	t.Cleanup(hanging.Close)
	framework.HelloController{Name: "loop-hanging", HookURL: hanging.URL}.Create(t, suite)
	const stuck = 8
	for i := 0; i < stuck; i++ {
		suite.CreateHello(t, ns, fmt.Sprintf("hang-%d", i), "loop-hanging", framework.HelloSpec("blue", "a"))
	}
	// The stack runs --workers=5: all of the controller's workers hang.
	suite.Eventually(t, "5 hanging calls in flight", func() (bool, error) { return inFlight.Load() == 5, nil })

	fine := newAnswerHook(t)
	framework.HelloController{Name: "loop-fine", HookURL: fine.srv.URL}.Create(t, suite)
	var generations []int64
	for i := 0; i < 5; i++ {
		p := suite.CreateHello(t, ns, fmt.Sprintf("fine-%d", i), "loop-fine", framework.HelloSpec("green", "a", "b"))
		generations = append(generations, p.GetGeneration())
	}
	for i, g := range generations {
		suite.WaitObserved(t, ns, fmt.Sprintf("fine-%d", i), g)
	}
	if n := inFlight.Load(); n == 0 {
		t.Errorf("the hanging hook had no call in flight when the other controller's parents had converged: it did not hang all along")
	}
	t.Logf("the other controller converged with %d hanging calls in flight (%d calls so far)", inFlight.Load(), calls.Load())
	for i := 0; i < stuck; i++ {
		p := suite.GetHello(t, ns, fmt.Sprintf("hang-%d", i))
		if observed, found, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration"); found {
			t.Errorf("parent hang-%d has observedGeneration %d, but its hook never answered", i, observed)
		}
	}
}
