package loop

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestClusterScopedParentAdoptsNamespacedOrphans: a cluster-scoped parent
// whose hook asks for a ConfigMap in a namespace adopts the orphan
// ConfigMap already there that matches its selector (the same object, its
// UID kept), as Metacontroller does and as the /sync preview says, instead
// of calling it another's.
func TestClusterScopedParentAdoptsNamespacedOrphans(t *testing.T) {
	t.Parallel()
	suite.SetUpHellos(t)
	ctx := context.Background()
	crd := framework.CRD{Group: "adopt.example.com", Plural: "clusterparents", Kind: "ClusterParent", ClusterScoped: true}.Manifest()
	rights := serverRights("clusterparents", "adopt.example.com", []string{"clusterparents", "clusterparents/status"}, parentVerbs...)
	suite.MustApply(t, crd+rights)
	if _, stderr, err := suite.Kubectl(ctx, "wait", "--for=condition=Established", "crd/clusterparents.adopt.example.com", "--timeout=60s"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	parents := schema.GroupVersionResource{Group: "adopt.example.com", Version: "v1", Resource: "clusterparents"}
	ns := suite.Namespace(t, "adopt-cluster")
	labels := map[string]string{"app": "adopt-cluster"}

	// The orphan, there before any parent.
	orphan, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "adopted", Labels: labels},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A hook that asks for that ConfigMap in that namespace.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := map[string]interface{}{
			"status": map[string]interface{}{"synced": true},
			"children": []interface{}{map[string]interface{}{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": "adopted", "namespace": ns, "labels": labels},
				"data":     map[string]interface{}{"k": "v"},
			}},
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(hook.Close)

	const ctrl = "adopt-cluster"
	manifest := `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: ` + ctrl + `
spec:
  parentResource: {apiVersion: adopt.example.com/v1, resource: clusterparents}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: "` + hook.URL + `/sync"}
`
	suite.ApplyController(t, ctrl, manifest)
	suite.WaitRunning(t, ctrl)

	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "adopt.example.com/v1", "kind": "ClusterParent",
		"metadata": map[string]interface{}{"name": "adopter"},
		"spec":     map[string]interface{}{"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "adopt-cluster"}}},
	}}
	created, err := suite.Dynamic.Resource(parents).Create(ctx, parent, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.Dynamic.Resource(parents).Delete(context.Background(), "adopter", metav1.DeleteOptions{})
	})

	suite.Eventually(t, "the cluster-scoped parent to adopt the orphan ConfigMap", func() (bool, error) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "adopted", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cm.UID != orphan.UID {
			t.Fatalf("the orphan was replaced (UID %s -> %s), not adopted", orphan.UID, cm.UID)
		}
		return framework.OwnedBy(cm, created), nil
	})
}
