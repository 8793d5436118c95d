package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// etagStats is what the Python hook in etag mode saw of the sync hook's
// calls: the If-None-Match of each ("" when none was sent) and how many it
// answered 304 Not Modified with no body.
type etagStats struct {
	IfNoneMatch []string
	NotModified int
}

func getETagStats(t *testing.T, hook *framework.PythonHook) (etagStats, error) {
	t.Helper()
	resp, err := http.Get(hook.URL + "/etags")
	if err != nil {
		return etagStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return etagStats{}, fmt.Errorf("GET /etags: %s", resp.Status)
	}
	var raw struct {
		IfNoneMatch map[string][]string `json:"ifNoneMatch"`
		NotModified map[string]int      `json:"notModified"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return etagStats{}, fmt.Errorf("can't decode GET /etags: %w", err)
	}
	return etagStats{IfNoneMatch: raw.IfNoneMatch["/sync"], NotModified: raw.NotModified["/sync"]}, nil
}

// TestETag: with webhook.etag enabled, the loop offers the hook the ETag of
// its last answer for the parent, and a 304 Not Modified, which has no body,
// stands for that answer: children and status stay as the hook wants them,
// and a child edited by hand is restored from it.
func TestETag(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	if err := hook.SetMode("etag"); err != nil {
		t.Fatal(err)
	}
	ns := suite.Namespace(t, "loop-etag")
	ctx := context.Background()
	framework.HelloController{Name: "loop-etag", HookURL: hook.URL, Method: "InPlace", Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.Hooks.Sync.Webhook.WithEtag(acv1alpha1.WebhookEtagConfig().WithEnabled(true))
	}}.Create(t, suite)
	parent := suite.CreateHello(t, ns, "p", "loop-etag", framework.HelloSpec("blue", "a", "b"))
	t.Cleanup(func() {
		if t.Failed() {
			stats, err := getETagStats(t, hook)
			t.Logf("hook's ETag calls: %+v (%v); events of p: %q", stats, err, events(t, ns, "p"))
		}
	})

	// wantState waits until the children and the status are what the hook
	// answers for color, and nothing more.
	wantState := func(t *testing.T, color string) {
		t.Helper()
		suite.Eventually(t, "p-a and p-b "+color+" and the parent's status", func() (bool, error) {
			cms := suite.ConfigMaps(t, ns)
			if framework.Names(cms) != "p-a,p-b" {
				return false, nil
			}
			for _, cm := range cms {
				if cm.Data["color"] != color || !framework.OwnedBy(&cm, parent) {
					return false, nil
				}
			}
			p := suite.GetHello(t, ns, "p")
			gotColor, _, _ := unstructured.NestedString(p.Object, "status", "color")
			observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedChildren")
			return gotColor == color && observed == 2, nil
		})
	}

	// fromCache makes a change that the loop answers with a sync whose
	// answer is unchanged, and waits until the hook has answered it 304 and
	// the state is again what the hook wants.
	fromCache := func(t *testing.T, change func(t *testing.T), color string) {
		t.Helper()
		before, err := getETagStats(t, hook)
		if err != nil {
			t.Fatal(err)
		}
		change(t)
		suite.Eventually(t, "a sync answered 304 Not Modified", func() (bool, error) {
			now, err := getETagStats(t, hook)
			return now.NotModified > before.NotModified, err
		})
		wantState(t, color)
		after, err := getETagStats(t, hook)
		if err != nil {
			t.Fatal(err)
		}
		for i, inm := range after.IfNoneMatch[len(before.IfNoneMatch):] {
			if inm == "" {
				t.Errorf("sync call %d after the change had no If-None-Match, although an answer with an ETag was cached", len(before.IfNoneMatch)+i+1)
			}
		}
	}

	editChild := func(t *testing.T) {
		patch := []byte(`{"data":{"color":"vandalised"}}`)
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "p-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	wantState(t, "blue")
	suite.WaitObserved(t, ns, "p", parent.GetGeneration())
	if stats, err := getETagStats(t, hook); err != nil {
		t.Fatal(err)
	} else if len(stats.IfNoneMatch) == 0 || stats.IfNoneMatch[0] != "" {
		t.Errorf("first sync had If-None-Match %q; nothing was cached yet", stats.IfNoneMatch)
	}

	t.Run("a child edited by hand is restored from the cached answer", func(t *testing.T) {
		fromCache(t, editChild, "blue")
	})

	t.Run("a label change is answered 304 and changes nothing", func(t *testing.T) {
		fromCache(t, func(t *testing.T) {
			patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
			if _, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Patch(ctx, "p", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "blue")
	})

	t.Run("a new answer replaces the cached one", func(t *testing.T) {
		before, err := getETagStats(t, hook)
		if err != nil {
			t.Fatal(err)
		}
		generation := suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green", "a", "b"))
		suite.WaitObserved(t, ns, "p", generation)
		wantState(t, "green")
		after, err := getETagStats(t, hook)
		if err != nil {
			t.Fatal(err)
		}
		if len(after.IfNoneMatch) == len(before.IfNoneMatch) || after.IfNoneMatch[len(before.IfNoneMatch)] == "" {
			t.Errorf("the sync for the new spec had no If-None-Match: %q", after.IfNoneMatch[len(before.IfNoneMatch):])
		}
		// Restored to green, not to the blue of the answer cached before.
		fromCache(t, editChild, "green")
	})

	for _, e := range events(t, ns, "p") {
		if strings.Contains(e, "SyncError") {
			t.Errorf("a sync failed: %s", e)
		}
	}
}
