package reconcile

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// A skipped parent names the fields of its controller's kind that select
// parents: a DecoratorController has no spec.parentResource.
func TestASkippedParentNamesTheSelectorOfItsKind(t *testing.T) {
	dc := &v1alpha1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "deco"}, Spec: v1alpha1.DecoratorControllerSpec{
		Resources: []v1alpha1.DecoratorControllerResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}},
		Hooks:     &v1alpha1.DecoratorControllerHooks{Sync: &v1alpha1.Hook{Version: ptr.To(v1alpha1.HookVersionV2)}},
	}}
	def, err := definition.Compile(dc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	onlyTeamB := func(cc *v1alpha1.CompositeController) {
		cc.Spec.ParentResource.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	}
	for _, tc := range []struct {
		name string
		c    *Controller
		want string
	}{
		{"CompositeController", controller(t, true, onlyTeamB), "the parent does not match spec.parentResource.labelSelector"},
		{"DecoratorController", &Controller{Def: def.Parents()[0]}, "the object does not match the labelSelector and annotationSelector of spec.resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parent()
			e, client := env(t, p.DeepCopy())
			res, err := tc.c.Sync(context.Background(), e, p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped != tc.want || len(verbs(client)) != 0 {
				t.Errorf("skipped %q with writes %q, want %q and none", res.Skipped, verbs(client), tc.want)
			}
		})
	}
}
