package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	acv1alpha1 "github.com/composite-apiserver/composite-apiserver/pkg/generated/applyconfiguration/metacontroller/v1alpha1"
)

// TestNoEscalationThroughACompositeController: a controller's loop acts
// with the server's identity, so whoever creates or changes one must be
// allowed what it would do. A user who may create CompositeControllers and
// manage ConfigMaps, but not Secrets, may create a controller of ConfigMaps
// and not one of Secrets; a cluster admin may.
func TestNoEscalationThroughACompositeController(t *testing.T) {
	t.Parallel()
	hook := setUpHellos(t)
	ctx := context.Background()
	author := userWithRules(t, "cc-author",
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		// The loop lists, watches and patches every parent (its
		// finalizer) and sends them to the author's hook.
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete", "list", "watch"}},
	)
	manifest := func(name, resource string) string {
		m := strings.Replace(helloController(name, hook.URL, "InPlace"), "resource: configmaps", "resource: "+resource, 1)
		return writeTemp(t, name+".yaml", m)
	}
	t.Cleanup(func() {
		for _, n := range []string{"esc-configmaps", "esc-secrets"} {
			_, _, _ = suite.Kubectl(ctx, "delete", "cc", n, "--ignore-not-found")
		}
	})

	// helloController also declares services, which the author may not
	// manage: that controller is refused too, naming what is missing.
	_, stderr, err := suite.KubectlAs(ctx, author, nil, "apply", "-f", manifest("esc-secrets", "secrets"))
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "create secrets") ||
		!strings.Contains(stderr, "delete services") || !strings.Contains(stderr, "you may not") {
		t.Errorf("a user who may not manage Secrets created a controller of Secrets: err=%v\n%s", err, stderr)
	}
	if _, _, err := suite.Kubectl(ctx, "get", "cc", "esc-secrets"); err == nil {
		t.Errorf("the refused controller esc-secrets exists")
	}

	// Without the Services the author may not touch, the same author may.
	only := strings.Replace(helloController("esc-configmaps", hook.URL, "InPlace"),
		"  - apiVersion: v1\n    resource: services\n    updateStrategy:\n      method: InPlace\n", "", 1)
	file := writeTemp(t, "only.yaml", only)
	if strings.Contains(only, "services") {
		t.Fatalf("the fixture still declares services:\n%s", only)
	}
	if _, stderr, err := suite.KubectlAs(ctx, author, nil, "apply", "-f", file); err != nil {
		t.Errorf("a user who may do all the controller's loop does was refused: %v\n%s", err, stderr)
	}

	// A cluster admin may create the Secrets controller.
	if _, stderr, err := suite.Kubectl(ctx, "apply", "-f", manifest("esc-secrets", "secrets")); err != nil {
		t.Errorf("a cluster admin was refused: %v\n%s", err, stderr)
	}

	// The same author may not have the server send a Secret they may not
	// read (kube-system's) to their hook as its credentials; one they may
	// read (a Role in their namespace grants it), they may.
	suite.MustCreateNamespace(t, "esc-team")
	readOwn := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "hook-token-reader", Namespace: "esc-team"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"hook-token"}, Verbs: []string{"get"}}},
	}
	if _, err := suite.Kube.RbacV1().Roles("esc-team").Create(ctx, readOwn, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	readOwnBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hook-token-reader", Namespace: "esc-team"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: readOwn.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "cc-author"}},
	}
	if _, err := suite.Kube.RbacV1().RoleBindings("esc-team").Create(ctx, readOwnBinding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	withToken := func(name, namespace string) string {
		m := strings.Replace(only, "name: esc-configmaps", "name: "+name, 1)
		m = strings.Replace(m, "        timeout: 5s\n", "        timeout: 5s\n        authorization:\n          secretRef: {namespace: "+namespace+", name: hook-token, key: token}\n", 1)
		if !strings.Contains(m, "secretRef") {
			t.Fatalf("the fixture has no place for the credentials:\n%s", m)
		}
		return writeTemp(t, name+".yaml", m)
	}
	t.Cleanup(func() {
		for _, n := range []string{"esc-foreign-secret", "esc-own-secret"} {
			_, _, _ = suite.Kubectl(ctx, "delete", "cc", n, "--ignore-not-found")
		}
	})
	_, stderr, err = suite.KubectlAs(ctx, author, nil, "apply", "-f", withToken("esc-foreign-secret", "kube-system"))
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "get secrets kube-system/hook-token") {
		t.Errorf("a controller whose hook credentials come from a Secret its author may not read was accepted: err=%v\n%s", err, stderr)
	}
	// The SubjectAccessReview cache of the delegating authorizer: a
	// RoleBinding made a moment ago may take seconds to show.
	var lastErr string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		_, stderr, err := suite.KubectlAs(ctx, author, nil, "apply", "-f", withToken("esc-own-secret", "esc-team"))
		lastErr = stderr
		return err == nil, nil
	}); err != nil {
		t.Errorf("a controller whose hook credentials come from a Secret its author may read was refused: %s", lastErr)
	}
}

// TestHookURLAtALinkLocalAddressIsRefused: a controller's author chooses
// its hook URLs, which the server fetches from its own place in the
// network; by default it refuses link-local and cloud metadata addresses
// (--hook-denied-cidrs) with a field error, in every form that reaches
// them: plain, a zoned IPv6 literal, and the NAT64 form of an IPv4 one.
func TestHookURLAtALinkLocalAddressIsRefused(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	for _, tc := range []struct{ url, denied string }{
		{"http://169.254.169.254/latest/meta-data", "169.254.0.0/16"},
		{"http://[fe80::a9fe:a9fe%25eth0]/latest/meta-data", "fe80::/10"},
		{"http://[64:ff9b::a9fe:a9fe]/latest/meta-data", "169.254.0.0/16"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			m := strings.Replace(compositeControllerYAML("metadata-hook", "metadatahooks"), "url: http://metadata-hook-hook.default/sync", "url: "+tc.url, 1)
			if !strings.Contains(m, tc.url) {
				t.Fatalf("the fixture has no URL to replace:\n%s", m)
			}
			_, stderr, err := kubectlStdin(t, suite.AdminKubeconfig, m, "apply", "-f", "-")
			if err == nil || !strings.Contains(stderr, "spec.hooks.sync.webhook.url") || !strings.Contains(stderr, tc.denied) {
				t.Fatalf("a hook URL at %s: err=%v\n%s\nwant a field error naming %s", tc.url, err, stderr, tc.denied)
			}
			if _, _, err := suite.Kubectl(ctx, "get", "cc", "metadata-hook"); err == nil {
				t.Error("the refused controller exists")
			}
		})
	}
}

// TestNamingAServiceAccountNeedsTheRightToImpersonateIt: a controller that
// names a ServiceAccount acts as it, so writing one is what `kubectl --as`
// is: a user who may write CompositeControllers but not impersonate the
// ServiceAccount is refused, naming the right; once a Role lets them
// impersonate it, the same controller is accepted — with none of the rights
// its loop uses, which are the ServiceAccount's to have.
func TestNamingAServiceAccountNeedsTheRightToImpersonateIt(t *testing.T) {
	t.Parallel()
	hook := setUpHellos(t)
	ctx := context.Background()
	const user, ns = "sa-author", "esc-identity"
	kubeconfig := userWithRules(t, user,
		rbacv1.PolicyRule{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
	)
	suite.MustCreateNamespace(t, ns)
	manifest := framework.HelloController{Name: "esc-identity", HookURL: hook.URL, SelectAll: true, Timeout: "5s", Spec: func(s *acv1alpha1.CompositeControllerSpecApplyConfiguration) {
		s.WithServiceAccount(acv1alpha1.ServiceAccountReference().WithNamespace(ns).WithName("runner"))
	}}.Manifest()
	file := writeTemp(t, "cc.yaml", manifest)
	t.Cleanup(func() { _, _, _ = suite.Kubectl(ctx, "delete", "cc", "esc-identity", "--ignore-not-found") })

	_, stderr, err := suite.KubectlAs(ctx, kubeconfig, nil, "apply", "-f", file)
	if err == nil || !strings.Contains(stderr, "Forbidden") || !strings.Contains(stderr, "impersonate serviceaccounts "+ns+"/runner") {
		t.Errorf("a user who may not impersonate the ServiceAccount wrote a controller acting as it: err=%v\n%s", err, stderr)
	}

	impersonate := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "impersonate-runner", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"runner"}, Verbs: []string{"impersonate"}}},
	}
	if _, err := suite.Kube.RbacV1().Roles(ns).Create(ctx, impersonate, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	impersonateBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "impersonate-runner", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: impersonate.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := suite.Kube.RbacV1().RoleBindings(ns).Create(ctx, impersonateBinding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if stderr, err := suite.ApplyAsOnceAllowed(ctx, kubeconfig, file); err != nil {
		t.Errorf("a user who may impersonate the ServiceAccount was refused: %s", stderr)
	}
}
