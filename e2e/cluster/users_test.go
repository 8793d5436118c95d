package cluster

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// userWithRules grants the user these rules only, through a ClusterRole
// and binding named e2e-<user>, and returns a kubeconfig that acts as
// them.
func userWithRules(t *testing.T, user string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	grantRules(t, "e2e-"+user, user, rules...)
	kubeconfig, err := suite.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// grantRules grants the user these rules through a ClusterRole and binding
// both named name; an existing one is left as it is, for a former run of
// the test (go test -count) made the same.
func grantRules(t *testing.T, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := suite.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := suite.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
