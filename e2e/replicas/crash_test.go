package loop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKillDuringCreationConverges kills composite-apiserver (SIGKILL) while
// it creates the children of 100 parents, starts it again, and checks that
// everything converges: every child exists once, owned by its parent.
func TestKillDuringCreationConverges(t *testing.T) {
	hook := setUp(t)
	ns := namespace(t, "loop-crash")
	ctx := context.Background()
	const parents = 100
	controller{Name: "loop-crash", HookURL: hook.URL}.create(t)

	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				createParent(t, ns, fmt.Sprintf("p%03d", i), "loop-crash", spec("blue", "a", "b", "c"))
			}
		}()
	}
	killed := false
	for i := 0; i < parents; i++ {
		jobs <- i
		// Kill it mid-way: some parents synced, some half, some not yet.
		if !killed && i == parents/2 {
			eventually(t, "the first children", func() (bool, error) { return len(configMaps(t, ns)) >= 20, nil })
			stack.KillComposite()
			killed = true
		}
	}
	close(jobs)
	wg.Wait()
	if err := stack.StartComposite(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitAPIServiceAvailable(ctx, true); err != nil {
		t.Fatal(err)
	}

	eventually(t, "all children", func() (bool, error) { return len(configMaps(t, ns)) == 3*parents, nil })
	list, err := dyn.Resource(hellos).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]unstructured.Unstructured{}
	for _, p := range list.Items {
		byName[p.GetName()] = p
	}
	for name, cm := range configMaps(t, ns) {
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
		if controllers != 1 || !ownedBy(&cm, &parent) {
			t.Errorf("ConfigMap %s: owners %v, want exactly its parent %s", name, cm.OwnerReferences, parentName)
		}
	}
	for _, p := range list.Items {
		waitObserved(t, ns, p.GetName(), p.GetGeneration())
	}
}
