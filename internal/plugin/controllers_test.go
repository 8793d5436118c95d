package plugin

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// CONTROLLER names a DecoratorController kubectl's way, TYPE/NAME; a bare
// NAME stays a CompositeController's.
func TestCommandsTakeBothKinds(t *testing.T) {
	parent := writeFile(t, "hello.yaml", helloParent)
	s := newFakeServer(&v1alpha1.DecoratorController{
		ObjectMeta: metav1.ObjectMeta{Name: "deco"},
		Spec: v1alpha1.DecoratorControllerSpec{
			Resources:   []v1alpha1.DecoratorControllerResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}}},
			Attachments: []v1alpha1.DecoratorControllerAttachmentRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}}},
		},
	})
	for _, args := range [][]string{
		{"preview", "hello", "-f", parent},
		{"preview", "dec/deco", "-f", parent},
		{"preview", "decoratorcontroller.metacontroller.k8s.io/deco", "-f", parent},
		{"sync", "decorators/deco", "--parent", "ns/p1"},
		{"sync", "cc/hello", "--parent", "ns/p1"},
	} {
		if r := s.run(t, "", args...); r.code != ExitOK {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := s.run(t, "", "sync", "dec/deco", "--parent", "ns/web", "--parent-kind", "StatefulSet.v1.apps"); r.code != ExitOK {
		t.Errorf("sync with --parent-kind: exit %d, stderr %q", r.code, r.stderr)
	} else if ref := s.requests[len(s.requests)-1].Spec.ParentRef; ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" {
		t.Errorf("--parent-kind StatefulSet.v1.apps sent %+v", ref)
	}
	s.synced = s.synced[:len(s.synced)-1]
	s.run(t, "", "sync", "dec/deco", "--parent", "ns/web", "--parent-kind", "StatefulSet").oneErrorLine(t, "want KIND.VERSION.GROUP")
	want := []string{"compositecontrollers/hello", "decoratorcontrollers/deco", "decoratorcontrollers/deco", "decoratorcontrollers/deco", "compositecontrollers/hello"}
	if strings.Join(s.synced, " ") != strings.Join(want, " ") {
		t.Errorf("synced %v, want %v", s.synced, want)
	}

	r := s.run(t, "", "rbac", "dec/deco")
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(r.stdout), &role); r.code != ExitOK || err != nil {
		t.Fatalf("rbac dec/deco: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if role.Name != "composite-apiserver-decorator-deco" || len(role.Rules) < 3 ||
		role.Rules[0].Resources[0] != "hellos" || role.Rules[1].Resources[0] != "hellos/status" {
		t.Errorf("role %s, rules %v: want the decorated resource's rules first", role.Name, role.Rules)
	}
	if !strings.Contains(r.stdout, "secrets") {
		t.Errorf("the role lacks the attachments' rights:\n%s", r.stdout)
	}

	s.run(t, "", "preview", "widget/x", "-f", parent).oneErrorLine(t, `"widget" is no kind of controller`)
}
