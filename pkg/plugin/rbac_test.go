package plugin

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func controllerWithChildren(name string, children ...v1alpha1.ResourceRule) *v1alpha1.CompositeController {
	cc := &v1alpha1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	for _, child := range children {
		cc.Spec.ChildResources = append(cc.Spec.ChildResources, v1alpha1.CompositeControllerChildResourceRule{ResourceRule: child})
	}
	return cc
}

func TestRBACOfAControllerWithTwoChildResources(t *testing.T) {
	cc := controllerWithChildren("hello",
		v1alpha1.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"},
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"})
	var out bytes.Buffer
	if err := writeClusterRole(&out, cc); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(out.Bytes(), &role); err != nil {
		t.Fatalf("the output is not a ClusterRole: %v\n%s", err, out.String())
	}
	if role.APIVersion != "rbac.authorization.k8s.io/v1" || role.Kind != "ClusterRole" || role.Name != "composite-apiserver-hello" {
		t.Errorf("role %s %s %s", role.APIVersion, role.Kind, role.Name)
	}
	if role.Labels[AggregationLabel] != "true" || len(role.Labels) != 1 {
		t.Errorf("labels %v, want only %s: \"true\"", role.Labels, AggregationLabel)
	}
	children := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: children},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: children},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("rules\n%+v\nwant\n%+v", role.Rules, want)
	}
	if !strings.HasPrefix(out.String(), "# ") || strings.Contains(out.String(), "customize") {
		t.Errorf("want a comment saying what the role is for, none about a customize hook:\n%s", out.String())
	}
}

func TestRBACGroupsChildResourcesOfOneGroup(t *testing.T) {
	cc := controllerWithChildren("web",
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "services"},
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "services"})
	cc.Spec.Hooks = &v1alpha1.CompositeControllerHooks{Customize: &v1alpha1.Hook{}}
	role, err := ControllerRole(cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 3 || !reflect.DeepEqual(role.Rules[2].Resources, []string{"configmaps", "services"}) {
		t.Errorf("rules %+v: want the core group's children in one rule", role.Rules)
	}
	var out bytes.Buffer
	if err := writeClusterRole(&out, cc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "# Its customize hook's related resources") {
		t.Errorf("a controller with a customize hook is not told about related resources:\n%s", out.String())
	}
}

func TestRBACOfABadController(t *testing.T) {
	cc := controllerWithChildren("bad", v1alpha1.ResourceRule{APIVersion: "a/b/c", Resource: "things"})
	if _, err := ControllerRole(cc); err == nil || !strings.Contains(err.Error(), "child resource 0") {
		t.Errorf("error %v, want one naming child resource 0", err)
	}
}
