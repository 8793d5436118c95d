package hooks

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
)

// Build puts each kind's sync and finalize hooks where the engine takes
// them: a DecoratorController's take a decorator's request, in
// Hooks.Decorator.
func TestBuildPutsTheHooksOfEachKindWhereTheEngineTakesThem(t *testing.T) {
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: v1alpha1.CompositeControllerSpec{Hooks: &v1alpha1.CompositeControllerHooks{
			Sync:     &v1alpha1.Hook{Webhook: urlHook("http://hook.example/sync")},
			Finalize: &v1alpha1.Hook{Webhook: urlHook("http://hook.example/finalize")},
		}},
	}
	composite, err := Build(context.Background(), definitiontest.Compile(t, cc), &fakeSecrets{}, Destinations{})
	if err != nil {
		t.Fatal(err)
	}
	defer composite.Close()
	if composite.Sync == nil || composite.Finalize == nil || composite.Decorator.Sync != nil || composite.Decorator.Finalize != nil {
		t.Errorf("CompositeController hooks %+v, want Sync and Finalize only", composite.Hooks)
	}

	dc := &v1alpha1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: v1alpha1.DecoratorControllerSpec{
		Resources: []v1alpha1.DecoratorControllerResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}}},
		Hooks:     &v1alpha1.DecoratorControllerHooks{Sync: &v1alpha1.Hook{Webhook: urlHook("http://hook.example/decorate")}},
	}}
	def, err := definition.Compile(dc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	decorator, err := Build(context.Background(), def.Parents()[0], &fakeSecrets{}, Destinations{})
	if err != nil {
		t.Fatal(err)
	}
	defer decorator.Close()
	if decorator.Decorator.Sync == nil || decorator.Decorator.Finalize != nil || decorator.Sync != nil || decorator.Finalize != nil || decorator.HasFinalize() {
		t.Errorf("DecoratorController hooks %+v, want Decorator.Sync only", decorator.Hooks)
	}
}

// A hook's errors name its controller's kind.
func TestCallErrorsNameTheControllersKind(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"", `CompositeController "c" sync hook (POST http://127.0.0.1:1/)`},
		{definition.KindDecorator, `DecoratorController "c" sync hook (POST http://127.0.0.1:1/)`},
	} {
		w := mustNew(t, Config{ControllerKind: tc.kind, Webhook: urlHook("http://127.0.0.1:1/")})
		err := w.fail(ReasonEncode, errors.New("nothing sent")) // not counted in the metrics
		if got := err.Error(); len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("kind %q: error %q, want it to start with %q", tc.kind, got, tc.want)
		}
	}
}
