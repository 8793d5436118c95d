package loop

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestADecoratorActsAsItsServiceAccount: a DecoratorController that names
// a ServiceAccount acts as it, as a CompositeController does. Its
// ServiceAccount may decorate hellos and write Secrets in one namespace
// only: a Hello there is decorated and gets its attachment; a Hello in
// another namespace (where the server itself may write) gets nothing, and
// a Forbidden Event names the ServiceAccount.
func TestADecoratorActsAsItsServiceAccount(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const ctrl = "decorator-identity"
	home, away := suite.Namespace(t, "decorator-identity-home"), suite.Namespace(t, "decorator-identity-away")
	if _, err := suite.Kube.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "decorator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suite.Grant(t, "decorator-identity", home, `rules:
- apiGroups: ["example.com"]
  resources: ["hellos"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["example.com"]
  resources: ["hellos/status"]
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["configmaps", "secrets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`, "{kind: ServiceAccount, name: decorator, namespace: "+home+"}")
	suite.Grant(t, "composite-apiserver-impersonate", home, `rules:
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["impersonate", "get"]
`, "{kind: ServiceAccount, name: composite-apiserver, namespace: composite-system}")

	createDecoratorManifest(t, ctrl, framework.DecoratorFixture{Name: ctrl, HookURL: hook.URL}.Manifest()+"  serviceAccount: {namespace: "+home+", name: decorator}\n")

	hello := suite.CreateHello(t, home, "h", ctrl, map[string]interface{}{}, annotate(map[string]string{"attach": "a"}))
	waitDecorated(t, func() (metav1.Object, error) {
		return suite.Dynamic.Resource(framework.Hellos).Namespace(home).Get(ctx, "h", metav1.GetOptions{})
	})
	waitAttachment(t, home, "h-a", ctrl, hello)

	suite.CreateHello(t, away, "h", ctrl, map[string]interface{}{}, annotate(map[string]string{"attach": "a"}))
	suite.WaitForEvent(t, away, "h", "Forbidden", "ServiceAccount "+home+"/decorator may not list hellos.example.com in namespace "+away, time.Minute)
	got, err := suite.Dynamic.Resource(framework.Hellos).Namespace(away).Get(ctx, "h", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if labels := got.GetLabels(); labels["decorated"] != "" {
		t.Errorf("a Hello where the decorator's ServiceAccount may not write was decorated: %v", labels)
	}
	if list, err := suite.Kube.CoreV1().Secrets(away).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range list.Items {
			if s.Annotations[decoratorAnnotation] == ctrl {
				t.Errorf("an attachment %s was written where the decorator's ServiceAccount may not", s.Name)
			}
		}
	}
}
