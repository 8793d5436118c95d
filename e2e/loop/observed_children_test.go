package loop

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// TestTheHookSeesEachChildAsItIsNow: the loop keeps a parent's observed
// children as its last hook request encoded them, and sends that encoding
// again for a child whose resourceVersion did not change (issue 34). A
// child someone else changes, twice, or deletes, reaches the hook as it
// is now: its status reports, per child, the note annotation it observed.
func TestTheHookSeesEachChildAsItIsNow(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	const ctrl = "loop-observed"
	ns := suite.Namespace(t, ctrl)

	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(func(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		name := req.Parent.GetName()
		seen := map[string]interface{}{}
		for key, child := range req.Children["ConfigMap.v1"] {
			seen[key] = child.GetAnnotations()["note"]
		}
		resp := &hookapi.SyncHookResponse{Status: map[string]interface{}{"seen": seen}}
		for i := range 3 {
			resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": fmt.Sprintf("%s-%d", name, i)},
				"data":     map[string]interface{}{"index": fmt.Sprint(i)},
			}})
		}
		return resp, nil
	})))
	t.Cleanup(hook.Close)
	framework.HelloController{Name: ctrl, HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{})

	reports := func(want map[string]string) {
		t.Helper()
		suite.Eventually(t, fmt.Sprintf("the parent's status reports the children's notes %v", want), func() (bool, error) {
			seen, _, _ := unstructured.NestedStringMap(suite.GetHello(t, ns, "p").Object, "status", "seen")
			if len(seen) != len(want) {
				return false, fmt.Errorf("status.seen %v", seen)
			}
			for k, v := range want {
				if got, ok := seen[k]; !ok || got != v {
					return false, fmt.Errorf("status.seen %v", seen)
				}
			}
			return true, nil
		})
	}
	note := func(child, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"note":%q}}}`, value)
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), child, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reports(map[string]string{"p-0": "", "p-1": "", "p-2": ""})
	note("p-1", "first")
	reports(map[string]string{"p-0": "", "p-1": "first", "p-2": ""})
	note("p-1", "second")
	reports(map[string]string{"p-0": "", "p-1": "second", "p-2": ""})
	note("p-2", "third")
	reports(map[string]string{"p-0": "", "p-1": "second", "p-2": "third"})
	// Deleted, p-0 is created again by the loop, without a note.
	note("p-0", "before its deletion")
	reports(map[string]string{"p-0": "before its deletion", "p-1": "second", "p-2": "third"})
	if err := suite.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "p-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reports(map[string]string{"p-0": "", "p-1": "second", "p-2": "third"})
}
