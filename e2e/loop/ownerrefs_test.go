package loop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOwnerReferencesTheHookSetsAreKept: a hook that gives a child an
// owner of its own (for garbage collection) gets it, with the parent's
// controller reference appended, as Metacontroller does.
func TestOwnerReferencesTheHookSetsAreKept(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	ctx := context.Background()
	ns := suite.Namespace(t, "hook-ownerrefs")
	anchor, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "anchor"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"parent"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(map[string]interface{}{
			"status": map[string]interface{}{"color": "blue"},
			"children": []interface{}{map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{
					"name": req.Parent.Metadata.Name + "-owned",
					"ownerReferences": []interface{}{map[string]interface{}{
						"apiVersion": "v1", "kind": "ConfigMap", "name": anchor.Name, "uid": string(anchor.UID),
					}},
				},
				"data": map[string]interface{}{"k": "v"},
			}},
		})
	}))
	t.Cleanup(hook.Close)
	const ctrl = "hook-ownerrefs"
	framework.HelloController{Name: ctrl, HookURL: hook.URL}.Create(t, suite)
	parent := suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{})
	suite.Eventually(t, "the child with both owners", func() (bool, error) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "p-owned", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		refs := cm.OwnerReferences
		if len(refs) != 2 {
			return false, nil
		}
		if refs[0].UID != anchor.UID || (refs[0].Controller != nil && *refs[0].Controller) {
			t.Fatalf("ownerReferences %+v: want the hook's (the anchor, not a framework.HelloController) first", refs)
		}
		return unless(framework.OwnedBy(cm, parent), nil)
	})
}
