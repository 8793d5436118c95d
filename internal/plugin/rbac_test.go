package plugin

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
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
	// Exactly what the loop checks (rights.Needed), no more: see
	// TestRBACIsWhatTheLoopChecks.
	children := []string{"list", "watch", "create", "patch", "delete"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"hellos/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: children},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
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
	role := ControllerRole(definitiontest.Compile(t, cc))
	if len(role.Rules) != 4 || !reflect.DeepEqual(role.Rules[2].Resources, []string{"configmaps", "services"}) {
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
	if err := writeClusterRole(io.Discard, cc); err == nil || !strings.Contains(err.Error(), "spec.childResources[0].apiVersion") {
		t.Errorf("error %v, want one naming spec.childResources[0].apiVersion", err)
	}
}

// The rights `kubectl composite rbac` prints are exactly the rights the loop
// checks before it starts a controller: one list, rights.Needed.
func TestRBACIsWhatTheLoopChecks(t *testing.T) {
	rolling := controllerWithChildren("rolling",
		v1alpha1.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"},
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
		v1alpha1.ResourceRule{APIVersion: "v1", Resource: "services"})
	rolling.Spec.ChildResources[0].UpdateStrategy = &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateRollingRecreate}
	for _, cc := range []*v1alpha1.CompositeController{
		controllerWithChildren("plain", v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}),
		controllerWithChildren("childless"),
		controllerWithChildren("core-parent", v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}),
		rolling,
	} {
		t.Run(cc.Name, func(t *testing.T) {
			if cc.Name == "core-parent" {
				cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}
			}
			def := definitiontest.Compile(t, cc)
			var printed []string
			for _, rule := range ControllerRole(def).Rules {
				for _, group := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, verb := range rule.Verbs {
							printed = append(printed, definition.Right{Verb: verb, Group: group, Resource: strings.Split(res, "/")[0],
								Subresource: strings.TrimPrefix(strings.TrimPrefix(res, strings.Split(res, "/")[0]), "/")}.String())
						}
					}
				}
			}
			// What the loop asks the target cluster about before it
			// starts the controller, every right denied.
			var mu sync.Mutex
			var checked []string
			kube := kubefake.NewClientset()
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				attrs := review.Spec.ResourceAttributes
				mu.Lock()
				defer mu.Unlock()
				checked = append(checked, definition.Right{Verb: attrs.Verb, Group: attrs.Group, Resource: attrs.Resource, Subresource: attrs.Subresource}.String())
				return true, review, nil
			})
			missing, err := (&rights.Checker{Kube: kube}).Missing(context.Background(), def)
			if err != nil || len(missing) != len(checked) {
				t.Fatalf("missing %v, %v; want every right asked about", missing, err)
			}
			sort.Strings(printed)
			sort.Strings(checked)
			if !reflect.DeepEqual(printed, checked) {
				t.Errorf("kubectl composite rbac prints\n%q\nthe loop checks\n%q", printed, checked)
			}
		})
	}
}

// A controller with an identity gets the rights its loop uses bound to its
// ServiceAccount, without the Events the server records itself, and no
// aggregation label: nothing of it is granted to the server.
func TestRBACOfAControllerWithAServiceAccount(t *testing.T) {
	cc := controllerWithChildren("hello", v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"})
	cc.Spec.ServiceAccount = &v1alpha1.ServiceAccountReference{Namespace: "team", Name: "hello"}
	var out bytes.Buffer
	if err := writeClusterRole(&out, cc); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(out.String(), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("want a ClusterRole and a ClusterRoleBinding, got:\n%s", out.String())
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if err := yaml.Unmarshal([]byte(docs[0]), &role); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	if role.Name != "composite-controller-hello" || len(role.Labels) != 0 {
		t.Errorf("role %s labels %v: want composite-controller-hello, not aggregated to the server", role.Name, role.Labels)
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "events" {
				t.Errorf("the identity is granted Events, which the server records: %+v", r)
			}
		}
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Namespace: "team", Name: "hello"}
	if len(binding.Subjects) != 1 || binding.Subjects[0] != want || binding.RoleRef.Name != role.Name {
		t.Errorf("binding %+v, want %s bound to %+v", binding, role.Name, want)
	}
	if !strings.Contains(out.String(), "impersonate") {
		t.Errorf("the output does not say the server must be allowed to impersonate the ServiceAccount:\n%s", out.String())
	}
}
