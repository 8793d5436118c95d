package replicas

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKillDuringCreationConverges kills composite-apiserver (SIGKILL) while
// it creates the children of 100 parents, starts it again, and checks that
// everything converges: every child exists once, owned by its parent.
func TestKillDuringCreationConverges(t *testing.T) {
	// Sequential: kills and starts the server.
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-crash")
	ctx := context.Background()
	const parents = 100
	framework.HelloController{Name: "loop-crash", HookURL: hook.URL}.Create(t, suite)

	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				suite.CreateHello(t, ns, fmt.Sprintf("p%03d", i), "loop-crash", framework.HelloSpec("blue", "a", "b", "c"))
			}
		}()
	}
	killed := false
	for i := 0; i < parents; i++ {
		jobs <- i
		// Kill it mid-way: some parents synced, some half, some not yet.
		if !killed && i == parents/2 {
			suite.Eventually(t, "the first children", func() (bool, error) { return len(suite.ConfigMaps(t, ns)) >= 20, nil })
			suite.KillComposite()
			killed = true
		}
	}
	close(jobs)
	wg.Wait()
	if err := suite.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		t.Fatal(err)
	}

	suite.Eventually(t, "all children", func() (bool, error) { return len(suite.ConfigMaps(t, ns)) == 3*parents, nil })
	list, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]unstructured.Unstructured{}
	for _, p := range list.Items {
		byName[p.GetName()] = p
	}
	for name, cm := range suite.ConfigMaps(t, ns) {
		parentName := name[:strings.LastIndex(name, "-")]
		parent, ok := byName[parentName]
		if !ok {
			t.Errorf("ConfigMap %s has no parent %s", name, parentName)
			continue
		}
		controllers := 0
		for _, ref := range cm.OwnerReferences {
			if ref.Controller != nil && *ref.Controller {
				controllers++
			}
		}
		if controllers != 1 || !framework.OwnedBy(&cm, &parent) {
			t.Errorf("ConfigMap %s: owners %v, want exactly its parent %s", name, cm.OwnerReferences, parentName)
		}
	}
	for _, p := range list.Items {
		suite.WaitObserved(t, ns, p.GetName(), p.GetGeneration())
	}
}
