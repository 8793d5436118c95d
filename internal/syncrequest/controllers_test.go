package syncrequest

import (
	"context"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// TestControllersAreForgottenWhenIdle: /sync keeps a controller compiled
// while its spec is unchanged, builds it again when the spec changes, and
// forgets a controller nobody synced for controllerIdle (a deleted one,
// which it is never told about).
func TestControllersAreForgottenWhenIdle(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	c := newControllers(hooks.NoClusterSecretSource{}, hooks.Destinations{})
	c.now = func() time.Time { return now }
	resolver := definition.GuessingResolver()

	a := definitiontest.ConfigMapController("a", "uid-a", "http://hook.example/sync")
	first, _, err := c.get(ctx, a, resolver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, _, _ := c.get(ctx, a, resolver, nil); again != first {
		t.Error("an unchanged controller was compiled again")
	}
	changed := a.DeepCopy()
	changed.Generation++
	if next, _, _ := c.get(ctx, changed, resolver, nil); next == first {
		t.Error("a changed spec was not compiled again")
	}

	// b is synced now and then; a is deleted and never asked about again.
	b := definitiontest.ConfigMapController("b", "uid-b", "http://hook.example/sync")
	for i := 0; i < 12; i++ {
		now = now.Add(time.Minute)
		if _, _, err := c.get(ctx, b, resolver, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.len(); n != 1 {
		t.Fatalf("%d controllers kept after 12 idle minutes of one of them, want 1", n)
	}
}
