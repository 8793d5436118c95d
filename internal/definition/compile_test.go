package definition

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// One Compile takes a controller of either kind, and each kind names its
// resource and author the same way; anything else is no controller.
func TestCompileTakesEitherKind(t *testing.T) {
	alice := &v1alpha1.ControllerAuthor{Username: "alice"}
	cc := &v1alpha1.CompositeController{}
	cc.Name = "hello"
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}
	cc.Status.Author = alice
	dc := serviceDecorator()
	dc.Status.Author = alice
	for _, tc := range []struct {
		controller runtime.Object
		kind       string
		resource   string
	}{
		{cc, KindComposite, "compositecontrollers.metacontroller.k8s.io"},
		{dc, KindDecorator, "decoratorcontrollers.metacontroller.k8s.io"},
	} {
		def, err := Compile(tc.controller, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if def.Kind != tc.kind || def.ControllerResource().String() != tc.resource {
			t.Errorf("%s: compiled as %s, resource %s; want %s", tc.kind, def.Kind, def.ControllerResource(), tc.resource)
		}
		if got := AuthorOf(tc.controller); got != alice || def.Author != alice {
			t.Errorf("%s: author %v (compiled %v), want alice", tc.kind, got, def.Author)
		}
	}
	if _, err := Compile(&v1alpha1.SyncRequest{}, nil); err == nil || !strings.Contains(err.Error(), "not a kind of controller") {
		t.Errorf("a SyncRequest compiled: %v", err)
	}
	if AuthorOf(&v1alpha1.SyncRequest{}) != nil {
		t.Error("a SyncRequest has an author")
	}
}

// A hook without responseUnMarshallMode decodes strictly from v2 on:
// ResolveHook and the registry (which keeps a mode set to its version's
// default in step with the version) read one rule.
func TestDefaultModeFollowsTheVersion(t *testing.T) {
	for version, want := range map[v1alpha1.HookVersion]v1alpha1.ResponseUnmarshallMode{
		"":                     v1alpha1.ResponseUnmarshallModeLoose,
		v1alpha1.HookVersionV1: v1alpha1.ResponseUnmarshallModeLoose,
		v1alpha1.HookVersionV2: v1alpha1.ResponseUnmarshallModeStrict,
	} {
		if got := DefaultMode(version); got != want {
			t.Errorf("version %q: %s, want %s", version, got, want)
		}
		h, err := ResolveHook(HookSync, &version, &v1alpha1.Webhook{})
		if err != nil || h.Strict != (want == v1alpha1.ResponseUnmarshallModeStrict) {
			t.Errorf("version %q resolved strict=%v (%v), want %s", version, h.Strict, err, want)
		}
	}
}

// Whether a group and resource is a child or a parent does not depend on
// its version.
func TestIsChildAndIsParentIgnoreTheVersion(t *testing.T) {
	def, err := Compile(serviceDecorator(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Resource: "services"}
	if !def.IsChild(gr.Group, gr.Resource) || def.IsChild("apps", "statefulsets") {
		t.Error("services must be a child, statefulsets not")
	}
	if !def.IsParent("apps", "statefulsets") || def.IsParent("", "services") {
		t.Error("statefulsets must be a parent, services not")
	}
}
