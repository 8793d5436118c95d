package podexamples

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// webs are the parents of TestRollingInPlaceDeploymentsWaitForTheirRollouts:
// each owns three Deployments of spec.image (and spec.nodeSelector).
var websCRD = framework.CRD{Group: "rollouts.example.com", Plural: "webs", Kind: "Web"}

var websRights = framework.AggregatedRights("composite-apiserver-webs", `- apiGroups: ["rollouts.example.com"]
  resources: ["webs", "webs/status"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`)

// websHook answers a Web with three Deployments, web-c, web-b and web-a in
// that order (the order a rolling update moves them in), two replicas of
// spec.image each, on nodes of spec.nodeSelector when it has one.
func websHook(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	spec, _, _ := unstructured.NestedMap(req.Parent.Object, "spec")
	image, _ := spec["image"].(string)
	resp := &hookapi.SyncHookResponse{Status: map[string]interface{}{"image": image}}
	for _, n := range []string{"c", "b", "a"} {
		name := req.Parent.GetName() + "-" + n
		pod := map[string]interface{}{
			"terminationGracePeriodSeconds": int64(1),
			"containers":                    []interface{}{map[string]interface{}{"name": "web", "image": image}},
		}
		if sel, ok := spec["nodeSelector"]; ok {
			pod["nodeSelector"] = sel
		}
		resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]interface{}{"name": name},
			"spec": map[string]interface{}{
				"replicas":                int64(2),
				"progressDeadlineSeconds": int64(600),
				"selector":                map[string]interface{}{"matchLabels": map[string]interface{}{"app": name}},
				"template": map[string]interface{}{
					"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": name}},
					"spec":     pod,
				},
			},
		}})
	}
	return resp, nil
}

// TestRollingInPlaceDeploymentsWaitForTheirRollouts: a CompositeController
// whose Deployments update RollingInPlace, checked on the Deployment's own
// rollout (Progressing with reason NewReplicaSetAvailable, Available). A
// new image rolls one Deployment at a time: web-b's template changes only
// once web-c's new ReplicaSet is available, on kwok's nodes. A template
// whose pods no node takes stops the rollout at web-c (the Web's Updated
// condition says which check waits) and leaves web-b and web-a on the old
// image; reverting it finishes the rollout.
func TestRollingInPlaceDeploymentsWaitForTheirRollouts(t *testing.T) {
	for _, m := range []string{websCRD.Manifest(), websRights} {
		suite.MustApply(t, m)
	}
	hook := httptest.NewServer(hookapi.SyncHandler(hookapi.SyncHookFunc(websHook)))
	t.Cleanup(hook.Close)
	ex := &example{ns: "webs"}
	suite.MustCreateNamespace(t, ex.ns)
	controller := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: webs
spec:
  generateSelector: true
  parentResource:
    apiVersion: rollouts.example.com/v1
    resource: webs
  childResources:
  - apiVersion: apps/v1
    resource: deployments
    updateStrategy:
      method: RollingInPlace
      statusChecks:
        conditions:
        - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
        - {type: Available, status: "True"}
  hooks:
    sync:
      webhook:
        url: %s/sync
`, hook.URL)
	suite.MustApply(t, controller)
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "compositecontroller", "webs", "--ignore-not-found")
		_, _, _ = suite.Kubectl(context.Background(), "delete", "namespace", ex.ns, "--wait=false")
	})
	ex.untilServed(t, "webs")
	web := []string{"webs", "shop"}
	suite.MustApply(t, "apiVersion: rollouts.example.com/v1\nkind: Web\nmetadata: {name: shop, namespace: webs}\nspec: {image: web:1}\n")
	for _, d := range []string{"shop-a", "shop-b", "shop-c"} {
		ex.until(t, []string{"deployment", d}, "{.status.availableReplicas}", "2")
	}

	image := func(d string) string {
		got, _ := ex.jsonpath([]string{"deployment", d}, "{.spec.template.spec.containers[0].image}")
		return got
	}
	rolledOut := updatedMessage(t, ex, web)
	ex.kubectl(t, "patch", "webs", "shop", "--type=merge", "-p", `{"spec":{"image":"web:2"}}`)
	rolledOut = untilOnANewRevision(t, ex, web, rolledOut)
	for _, d := range []string{"shop-a", "shop-b", "shop-c"} {
		if got := image(d); got != "web:2" {
			t.Errorf("deployment %s runs %q after the rollout, want web:2", d, got)
		}
		ex.until(t, []string{"deployment", d}, `{.status.conditions[?(@.type=="Progressing")].reason}`, "NewReplicaSetAvailable")
	}
	// One at a time: each Deployment's template changed only after the
	// one before it had its new ReplicaSet available.
	for _, pair := range [][2]string{{"shop-c", "shop-b"}, {"shop-b", "shop-a"}} {
		available, _ := ex.jsonpath([]string{"deployment", pair[0]}, `{.status.conditions[?(@.type=="Progressing")].lastUpdateTime}`)
		updated := newestReplicaSetCreated(t, ex, pair[1])
		if updated < available {
			t.Errorf("%s's new ReplicaSet was created at %s, before %s's was available (%s)", pair[1], updated, pair[0], available)
		}
	}

	// Pods no node takes: the rollout stops at its first Deployment.
	ex.kubectl(t, "patch", "webs", "shop", "--type=merge", "-p", `{"spec":{"image":"web:3","nodeSelector":{"composite.dev/no-such-node":"true"}}}`)
	// It waits first for shop-c's new generation to be observed, then,
	// for good, on shop-c's Progressing check.
	ex.untilRolloutWaitsOn(t, web, "shop-c", "Progressing")
	if got := image("shop-c"); got != "web:3" {
		t.Errorf("shop-c runs %q, want web:3 (the rollout's first step)", got)
	}
	for _, d := range []string{"shop-b", "shop-a"} {
		if got := image(d); got != "web:2" {
			t.Errorf("deployment %s runs %q while shop-c's rollout is stuck, want web:2", d, got)
		}
	}

	ex.kubectl(t, "patch", "webs", "shop", "--type=json", "-p", `[{"op":"replace","path":"/spec/image","value":"web:4"},{"op":"remove","path":"/spec/nodeSelector"}]`)
	untilOnANewRevision(t, ex, web, rolledOut)
	for _, d := range []string{"shop-a", "shop-b", "shop-c"} {
		if got := image(d); got != "web:4" {
			t.Errorf("deployment %s runs %q after the rollout, want web:4", d, got)
		}
	}
}

// updatedMessage is the message of the Web's Updated condition, which
// names the ControllerRevision its children are on.
func updatedMessage(t *testing.T, ex *example, web []string) string {
	t.Helper()
	got, err := ex.jsonpath(web, `{.status.conditions[?(@.type=="Updated")].message}`)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// untilOnANewRevision waits for the Web's Updated condition to say
// OnLatestRevision of a revision other than the one before names: the
// condition said OnLatestRevision before the change too, so the reason
// alone would be an earlier state. It returns the new message.
func untilOnANewRevision(t *testing.T, ex *example, web []string, before string) string {
	t.Helper()
	var message string
	ex.waitFor(t, "the Web's children on a new latest revision", func() (bool, error) {
		reason, msg, err := ex.updatedCondition(web)
		if err != nil {
			return false, err
		}
		message = msg
		if reason != "OnLatestRevision" || message == before {
			return false, fmt.Errorf("its Updated condition is %s: %q", reason, message)
		}
		return true, nil
	})
	return message
}

// newestReplicaSetCreated answers when deployment's newest ReplicaSet was
// created (RFC 3339, UTC).
func newestReplicaSetCreated(t *testing.T, ex *example, deployment string) string {
	t.Helper()
	created := ex.rows(t, []string{"rs", "-l", "app=" + deployment}, `{range .items[*]}{.metadata.creationTimestamp}{"\n"}{end}`)
	newest := ""
	for _, c := range created {
		if c > newest {
			newest = c
		}
	}
	return newest
}
