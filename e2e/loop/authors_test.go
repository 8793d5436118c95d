package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// forgetAuthor removes the stored status.author of the CompositeController
// name in etcd, as a version that recorded no author left it.
func forgetAuthor(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{suite.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	got, err := client.Get(ctx, framework.CompositeEtcdPrefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, kv := range got.Kvs {
		if strings.HasSuffix(string(kv.Key), "/compositecontrollers/"+name) {
			key = string(kv.Key)
		}
	}
	if key == "" {
		t.Fatalf("no etcd key of CompositeController %s under %s", name, framework.CompositeEtcdPrefix)
	}
	stored, err := client.Get(ctx, key)
	if err != nil || len(stored.Kvs) != 1 {
		t.Fatalf("get %s: %v", key, err)
	}
	var obj map[string]interface{}
	if err := json.Unmarshal(stored.Kvs[0].Value, &obj); err != nil {
		t.Fatalf("the stored controller is not JSON: %v", err)
	}
	status, _ := obj["status"].(map[string]interface{})
	if status["author"] == nil {
		t.Fatalf("the stored controller has no author: %s", stored.Kvs[0].Value)
	}
	delete(status, "author")
	data, _ := json.Marshal(obj)
	if _, err := client.Put(ctx, key, string(data)); err != nil {
		t.Fatal(err)
	}
}

// TestTheServerWritingALegacyControllerDoesNotBecomeItsAuthor: a
// controller stored before authors were recorded takes as author whoever
// may run it and writes it again. The server may run it, and writes it
// when a DecoratorController decorates CompositeControllers (its hook
// labels them): that write, which comes back through kube-apiserver in the
// server's own name, must not make the server the author, or the
// controller would run with the server's rights checked against nobody
// but the server (T12). It stays without an author, Ready False with
// reason AuthorUnknown.
func TestTheServerWritingALegacyControllerDoesNotBecomeItsAuthor(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, dec = "self-author-legacy", "self-author-decorator"
	// Labelled for the decorator from the start: a label written later by
	// an administrator would make them its author.
	manifest := strings.Replace(framework.HelloController{Name: ctrl, HookURL: hook.URL}.Manifest(),
		"  name: "+ctrl+"\n", "  name: "+ctrl+"\n  labels: {test: "+dec+"}\n", 1)
	suite.ApplyController(t, ctrl, manifest)
	suite.WaitRunning(t, ctrl)
	forgetAuthor(t, ctrl)
	suite.Eventually(t, "the controller without an author to stop with AuthorUnknown", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "AuthorUnknown", nil
	})

	if err := suite.Apply(ctx, serverRights("self-author-ccs", "metacontroller.k8s.io",
		[]string{"compositecontrollers", "compositecontrollers/status"}, parentVerbs...)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "clusterrole", "composite-apiserver-self-author-ccs", "--ignore-not-found")
	})
	createDecoratorManifest(t, dec, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[1]s
spec:
  resources:
  - apiVersion: metacontroller.k8s.io/v1alpha1
    resource: compositecontrollers
    labelSelector:
      matchLabels: {test: %[1]s}
  hooks:
    sync:
      version: v2
      webhook:
        url: %[2]s/decorate
        timeout: 3s
`, dec, hook.URL))

	var got *v1alpha1.CompositeController
	suite.Eventually(t, "the decorator's label on the framework.HelloController, written by the server", func() (bool, error) {
		var err error
		got, err = suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, ctrl, metav1.GetOptions{})
		return err == nil && got.Labels["decorated"] == "yes", err
	})
	if a := got.Status.Author; a != nil {
		t.Fatalf("the server's write made %q (uid %q) the author of a controller stored without one", a.Username, a.UID)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != "AuthorUnknown" {
		t.Fatalf("Ready = %+v, want False with reason AuthorUnknown", c)
	}
}

// TestAControllerStopsWhenItsAuthorMayNoLongerRunIt: a controller's author
// is checked when they write it, on every start of its loop and again on
// the periodic resync (--resync-period, short here). Once the author's
// RoleBinding for the parent resource is deleted, the running controller
// stops, Ready False with reason Forbidden naming the author and the
// rights; once it is granted back, the controller runs again and syncs a
// parent's new spec.
func TestAControllerStopsWhenItsAuthorMayNoLongerRunIt(t *testing.T) {
	// Sequential: restarts the server (restartWith).
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl, author = "revoked-author", "revoked-author"
	suite.RestartWith(t, "--resync-period=5s")
	ns := suite.Namespace(t, ctrl)
	subject := "{apiGroup: rbac.authorization.k8s.io, kind: User, name: " + author + "}"
	// The parent's rights in one binding, to be revoked; the children's
	// and the controller's in another.
	parentRules := `rules:
- apiGroups: ["example.com"]
  resources: ["hellos"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["example.com"]
  resources: ["hellos/status"]
  verbs: ["get", "update"]
`
	suite.Grant(t, "e2e-revoked-author-parents", "", parentRules, subject)
	suite.Grant(t, "e2e-revoked-author", "", `rules:
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["metacontroller.k8s.io"]
  resources: ["compositecontrollers"]
  verbs: ["get", "list", "create", "update", "patch"]
`, subject)
	kubeconfig, err := suite.UserKubeconfig(author)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cc.yaml")
	if err := os.WriteFile(file, []byte(framework.HelloController{Name: ctrl, HookURL: hook.URL}.Manifest()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = suite.Kubectl(context.Background(), "delete", "cc", ctrl, "--ignore-not-found") })
	if stderr, err := suite.ApplyAsOnceAllowed(ctx, kubeconfig, file); err != nil {
		t.Fatalf("the author was refused a controller they may run: %s", stderr)
	}
	suite.WaitRunning(t, ctrl)
	suite.CreateHello(t, ns, "p", ctrl, map[string]interface{}{"configMaps": []interface{}{"a"}})
	suite.WaitConfigMaps(t, ns, "p-a")

	if _, stderr, err := suite.Kubectl(ctx, "delete", "clusterrolebinding", "e2e-revoked-author-parents"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	want := fmt.Sprintf("the controller's author %q may not list hellos.example.com", author)
	suite.Eventually(t, "the controller whose author may no longer list its parents to stop, Forbidden", func() (bool, error) {
		c := condition(t, ctrl, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Forbidden" && strings.Contains(c.Message, want), nil
	})

	suite.Grant(t, "e2e-revoked-author-parents", "", parentRules, subject)
	suite.WaitRunning(t, ctrl)
	generation := suite.SetHelloSpec(t, ns, "p", map[string]interface{}{"configMaps": []interface{}{"a", "b"}})
	suite.WaitObserved(t, ns, "p", generation)
}
