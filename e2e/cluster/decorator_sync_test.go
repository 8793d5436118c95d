package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// TestLiveSyncOfADecoratedObject: with the loop off in this package, a
// DecoratorController's /sync decorates one live object now, as its loop
// would: the finalizer of its finalize hook, the hook's label (and one
// removed) and annotation set on the object, its status written as the
// hook answered it, and an attachment created, owned and marked. A caller
// who may not create the attachment is refused, naming it, and nothing is
// written.
func TestLiveSyncOfADecoratedObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hook := setUpHellos(t)
	ns := "decorator-sync"
	suite.MustCreateNamespace(t, ns)
	if err := suite.Apply(ctx, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: decorator-sync
spec:
  resources:
  - apiVersion: example.com/v1
    resource: hellos
  attachments:
  - apiVersion: v1
    resource: secrets
  hooks:
    sync:
      webhook: {url: %[1]s/decorate}
    finalize:
      webhook: {url: %[1]s/decorate-finalize}
`, hook.URL)); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	object, err := dyn.Resource(hellosGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "d", "namespace": ns, "labels": map[string]interface{}{"stale": "yes"},
			"annotations": map[string]interface{}{"attach": "a", "drop-label": "stale"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "patch", "-n", ns, "hellos.example.com", "d", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	})
	body := fmt.Sprintf(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"SyncRequest","spec":{"parentRef":{"namespace":%q,"name":"d"}}}`, ns)
	request := writeTemp(t, "sync.json", body)
	url := "/apis/metacontroller.k8s.io/v1alpha1/decoratorcontrollers/decorator-sync/sync"

	// A caller who may sync and touch the object, but not write Secrets.
	syncer := userWithRules(t, "decorator-syncer",
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"decoratorcontrollers/sync"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}},
	)
	_, stderr, err := suite.KubectlAs(ctx, syncer, nil, "create", "--raw", url, "-f", request)
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "create secrets "+ns+"/d-a") {
		t.Fatalf("a live sync by a user who may not create the attachment: err %v\n%s\nwant Forbidden naming create secrets %s/d-a", err, stderr, ns)
	}
	if _, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "d-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused sync created the attachment: %v", err)
	}
	if got, err := dyn.Resource(hellosGVR).Namespace(ns).Get(ctx, "d", metav1.GetOptions{}); err != nil || got.GetLabels()["decorated"] != "" {
		t.Errorf("a refused sync decorated the object: %v %v", got.GetLabels(), err)
	}

	out, stderr, err := suite.Kubectl(ctx, "create", "--raw", url, "-f", request)
	if err != nil {
		t.Fatalf("the admin's live sync: %v\n%s", err, stderr)
	}
	var answer struct {
		Status struct {
			Plan []struct{ Action, Kind, Name, Error string }
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatal(err)
	}
	if len(answer.Status.Plan) != 1 || answer.Status.Plan[0].Action != "Create" || answer.Status.Plan[0].Name != "d-a" || answer.Status.Plan[0].Error != "" {
		t.Errorf("plan %+v: want Secret d-a created", answer.Status.Plan)
	}
	// Done when the answer came: no waiting.
	got, err := dyn.Resource(hellosGVR).Namespace(ns).Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := got.GetFinalizers(); len(fs) != 1 || fs[0] != "metacontroller.io/decoratorcontroller-decorator-sync" {
		t.Errorf("finalizers %v, want the decorator's", fs)
	}
	if _, stale := got.GetLabels()["stale"]; got.GetLabels()["decorated"] != "yes" || stale || got.GetAnnotations()["decorated-by"] != "hook.py" {
		t.Errorf("labels %v, annotations %v: want decorated=yes, stale removed, decorated-by", got.GetLabels(), got.GetAnnotations())
	}
	if status, _, _ := unstructured.NestedMap(got.Object, "status"); status["decorated"] != true || status["observedGeneration"] != nil {
		t.Errorf("status %v: want the hook's, as it answered it", status)
	}
	secret, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "d-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(secret); ref == nil || ref.UID != object.GetUID() || secret.Annotations["metacontroller.k8s.io/decorator-controller"] != "decorator-sync" {
		t.Errorf("attachment controller %v, annotations %v", ref, secret.Annotations)
	}
}

// TestDecoratorAuthorNeedsTheLoopsRights: whoever writes a
// DecoratorController must be allowed what its loop does with the
// server's identity on every decorated resource and attachment; without
// it the controller is refused, naming what is missing, and not stored.
func TestDecoratorAuthorNeedsTheLoopsRights(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hook := setUpHellos(t)
	author := userWithRules(t, "dec-author",
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"decoratorcontrollers"}, Verbs: []string{"get", "create", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete", "list", "watch"}},
	)
	manifest := func(name, attachments string) string {
		m := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %s
spec:
  resources:
  - {apiVersion: example.com/v1, resource: hellos}
  attachments:
  - {apiVersion: v1, resource: %s}
  hooks:
    sync:
      webhook: {url: %s/decorate}
`, name, attachments, hook.URL)
		return writeTemp(t, name+".yaml", m)
	}
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "dec", "dec-secrets", "dec-configmaps", "--ignore-not-found")
	})
	_, stderr, err := suite.KubectlAs(ctx, author, nil, "apply", "-f", manifest("dec-secrets", "secrets"))
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "create secrets") || !strings.Contains(stderr, "you may not") {
		t.Errorf("a user who may not manage Secrets created a decorator with Secret attachments: err=%v\n%s", err, stderr)
	}
	if _, _, err := suite.Kubectl(ctx, "get", "dec", "dec-secrets"); err == nil {
		t.Errorf("the refused DecoratorController dec-secrets exists")
	}
	if _, stderr, err := suite.KubectlAs(ctx, author, nil, "apply", "-f", manifest("dec-configmaps", "configmaps")); err != nil {
		t.Errorf("a user who may do all the decorator's loop does was refused: %v\n%s", err, stderr)
	}
}
