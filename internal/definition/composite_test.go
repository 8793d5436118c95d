package definition

import (
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestCompilePatches(t *testing.T) {
	str := func(s string) *string { return &s }
	cc := &v1alpha1.CompositeController{Spec: v1alpha1.CompositeControllerSpec{Hooks: &v1alpha1.CompositeControllerHooks{
		Patches: []v1alpha1.PatchHook{
			{Name: "hook", EnabledIf: str("builtin.parent.spec.replicas > 1"), Webhook: &v1alpha1.Webhook{URL: str("http://x")}},
			{Name: "inline", Definitions: []v1alpha1.PatchDefinition{{
				Selector:    v1alpha1.PatchSelector{APIVersion: "v1", Kind: "ConfigMap"},
				JSONPatches: []v1alpha1.JSONPatch{{Op: v1alpha1.JSONPatchOpRemove, Path: "/data"}},
			}}},
		},
	}}}
	cc.Spec.ParentResource.APIVersion, cc.Spec.ParentResource.Resource = "example.com/v1", "things"
	def, err := Compile(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := def.Hooks.Patches
	if len(steps) != 2 || steps[0].Name != "hook" || steps[0].EnabledIf == nil || steps[1].Name != "inline" || steps[1].EnabledIf != nil {
		t.Errorf("steps %+v", steps)
	}
	if w := steps[0].Webhook; w == nil || *w.Webhook.URL != "http://x" || w.Name != "patch:hook" || !w.Strict || steps[0].Inline != nil {
		t.Errorf("the webhook patch compiled to %+v", steps[0])
	}
	if steps[1].Inline == nil || steps[1].Webhook != nil {
		t.Errorf("the inline patch compiled to %+v", steps[1])
	}

	cc.Spec.Hooks.Patches[1].EnabledIf = str("builtin.parent.nope")
	if _, err := Compile(cc, nil); err == nil || !strings.Contains(err.Error(), `patch "inline": enabledIf does not compile`) ||
		!strings.HasPrefix(err.Error(), "spec.hooks.patches[1]: ") {
		t.Errorf("Compile with a bad enabledIf: %v", err)
	}
	cc.Spec.Hooks = nil
	if def, err := Compile(cc, nil); err != nil || def.Hooks.Patches != nil {
		t.Errorf("Compile without patches = %+v, %v; want no patches", def.Hooks, err)
	}
}

// A hook is defaulted in one place: version v1, decoding by version unless
// the webhook says, timeout DefaultHookTimeout.
func TestResolveHook(t *testing.T) {
	v2, bad := v1alpha1.HookVersionV2, v1alpha1.HookVersion("v3")
	loose, odd := v1alpha1.ResponseUnmarshallModeLoose, v1alpha1.ResponseUnmarshallMode("odd")
	for _, tc := range []struct {
		name    string
		version *v1alpha1.HookVersion
		webhook *v1alpha1.Webhook
		want    Hook
		wantErr string
	}{
		{"unset", nil, &v1alpha1.Webhook{}, Hook{Version: v1alpha1.HookVersionV1, Timeout: DefaultHookTimeout}, ""},
		{"v2 decodes strictly", &v2, &v1alpha1.Webhook{}, Hook{Version: v2, Strict: true, Timeout: DefaultHookTimeout}, ""},
		{"v2 told to be loose", &v2, &v1alpha1.Webhook{ResponseUnMarshallMode: &loose}, Hook{Version: v2, Timeout: DefaultHookTimeout}, ""},
		{"unknown version", &bad, &v1alpha1.Webhook{}, Hook{}, `unsupported hook version "v3"`},
		{"unknown mode", nil, &v1alpha1.Webhook{ResponseUnMarshallMode: &odd}, Hook{}, `unsupported responseUnMarshallMode "odd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ResolveHook("sync", tc.version, tc.webhook)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Name, tc.want.Webhook = "sync", tc.webhook
			if *h != tc.want {
				t.Errorf("got %+v, want %+v", *h, tc.want)
			}
		})
	}
}

// A controller that can't compile is one error naming the field at fault.
func TestCompileErrorNamesTheField(t *testing.T) {
	cc := &v1alpha1.CompositeController{}
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}
	cc.Spec.ChildResources = []v1alpha1.CompositeControllerChildResourceRule{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "a/b/c", Resource: "things"}},
	}
	_, err := Compile(cc, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "spec.childResources[1].apiVersion: ") {
		t.Errorf("error %v, want one naming spec.childResources[1].apiVersion", err)
	}
}

// Compiled once: child resources each once with their update method, the
// first entry winning; rolling known; hooks resolved; rights listed.
func TestCompileComposite(t *testing.T) {
	v2 := v1alpha1.HookVersionV2
	cc := &v1alpha1.CompositeController{}
	cc.Name = "web"
	cc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}
	cc.Spec.ChildResources = []v1alpha1.CompositeControllerChildResourceRule{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"},
			UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateRollingInPlace}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
			UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateRecreate}},
	}
	cc.Spec.Hooks = &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Version: &v2, Webhook: &v1alpha1.Webhook{}}}
	def, err := Compile(cc, GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Children) != 2 || def.Children[0].Method != v1alpha1.ChildUpdateOnDelete || def.Children[1].Method != v1alpha1.ChildUpdateRollingInPlace || !def.Rolling {
		t.Errorf("children %+v, rolling %v", def.Children, def.Rolling)
	}
	if def.Hooks.Sync.Version != v2 || !def.Hooks.Sync.Strict || def.Hooks.Finalize != nil {
		t.Errorf("hooks %+v", def.Hooks)
	}
	if def.Finalizer != "metacontroller.io/compositecontroller-web" || def.FieldManager != "metacontroller.k8s.io/web" {
		t.Errorf("finalizer %q, field manager %q", def.Finalizer, def.FieldManager)
	}
	if got := def.Rights[len(def.Rights)-1]; got.String() != "delete controllerrevisions.metacontroller.k8s.io" {
		t.Errorf("last right %s: a rolling controller writes ControllerRevisions", got)
	}
	// The guessing resolver can't map resources to kinds: scopes unknown.
	if def.Parent.Err == nil {
		t.Errorf("parent resolved without discovery: %+v", def.Parent)
	}
}
