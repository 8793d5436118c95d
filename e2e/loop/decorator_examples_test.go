package loop

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdRolesRights is what an admin grants composite-apiserver for the
// example: the rules `kubectl composite rbac dec/crd-role-controller`
// prints for its resources (Events the server may record already).
const crdRolesRights = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: composite-apiserver-decorator-crd-role-controller
  labels:
    metacontroller.k8s.io/aggregate-to-composite-apiserver: "true"
rules:
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions/status"]
  verbs: ["update"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  verbs: ["list", "watch", "create", "patch", "delete"]
`

// Metacontroller's crd-roles example runs end to end, its manifest as it is
// but for the hook's URL, with its hook ported to e2e/hooks/hook.py as it
// is: a CRD annotated enable-default-roles gets
// a reader ClusterRole, owned by the CRD, which the garbage collector
// deletes with it; a CRD without the annotation gets none.
func TestMetacontrollerCRDRolesExampleRuns(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()
	suite.MustApply(t, crdRolesRights)
	manifest := framework.MetacontrollerDecorator("crd-roles")
	manifest = strings.Replace(manifest, "http://crd-role-controller.metacontroller", hook.URL, 1)
	createDecoratorManifest(t, "crd-role-controller", manifest)

	crd := func(plural string, annotated bool) string {
		annotations := ""
		if annotated {
			annotations = "\n  annotations: {enable-default-roles: \"yes\"}"
		}
		return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.roles.example.com` + annotations + `
spec:
  group: roles.example.com
  scope: Namespaced
  names: {plural: ` + plural + `, kind: ` + strings.ToUpper(plural[:1]) + plural[1:len(plural)-1] + `}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`
	}
	suite.MustApply(t, crd("plains", false))
	suite.MustApply(t, crd("roleds", true))
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "crd", "plains.roles.example.com", "--ignore-not-found")
	})
	roled, err := suite.Dynamic.Resource(crds).Get(ctx, "roleds.roles.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	suite.Eventually(t, "ClusterRole roleds.roles.example.com-reader owned by its CRD", func() (bool, error) {
		role, err := suite.Kube.RbacV1().ClusterRoles().Get(ctx, "roleds.roles.example.com-reader", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return framework.OwnedBy(role, roled) && role.Annotations[decoratorAnnotation] == "crd-role-controller", nil
	})
	// The annotated CRD's attachment came after the other CRD was seen.
	if _, err := suite.Kube.RbacV1().ClusterRoles().Get(ctx, "plains.roles.example.com-reader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a CRD without the annotation got a ClusterRole: %v", err)
	}
	if err := suite.Dynamic.Resource(crds).Delete(ctx, "roleds.roles.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "ClusterRole roleds.roles.example.com-reader", func() error {
		_, err := suite.Kube.RbacV1().ClusterRoles().Get(ctx, "roleds.roles.example.com-reader", metav1.GetOptions{})
		return err
	})
}
