package parentloop

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// Which parent updates sync the parent, by kind and ignoreStatusChanges:
// without it every update; with it, a CompositeController skips a change
// of status alone, a DecoratorController any change that leaves the
// generation, labels and annotations as they were and deletes nothing.
func TestParentUpdatesSyncAsThePredicatesSay(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"x": "1"}}}
		u.SetGeneration(1)
		u.SetResourceVersion("1")
		u.SetLabels(map[string]string{"a": "1"})
		u.SetAnnotations(map[string]string{"b": "1"})
		return u
	}
	changes := map[string]func(u *unstructured.Unstructured){
		"status only":         func(u *unstructured.Unstructured) { u.Object["status"] = map[string]interface{}{"ok": true} },
		"generation":          func(u *unstructured.Unstructured) { u.SetGeneration(2) },
		"labels":              func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "2"}) },
		"annotations":         func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"b": "2"}) },
		"deletion":            func(u *unstructured.Unstructured) { now := metav1.Now(); u.SetDeletionTimestamp(&now) },
		"data, no generation": func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]interface{}{"x": "2"} },
	}
	for _, tc := range []struct {
		kind                string
		ignoreStatusChanges bool
		synced              map[string]bool
	}{
		{definition.KindComposite, false, map[string]bool{"status only": true, "generation": true, "labels": true, "annotations": true, "deletion": true, "data, no generation": true}},
		{definition.KindDecorator, false, map[string]bool{"status only": true, "generation": true, "labels": true, "annotations": true, "deletion": true, "data, no generation": true}},
		{definition.KindComposite, true, map[string]bool{"generation": true, "labels": true, "annotations": true, "deletion": true, "data, no generation": true}},
		{definition.KindDecorator, true, map[string]bool{"generation": true, "labels": true, "annotations": true, "deletion": true}},
	} {
		wanted := updatesOf(&definition.Definition{Kind: tc.kind, IgnoreStatusChanges: tc.ignoreStatusChanges})
		for name, change := range changes {
			cur := base()
			change(cur)
			cur.SetResourceVersion("2")
			if got := wanted(base(), cur); got != tc.synced[name] {
				t.Errorf("%s, ignoreStatusChanges %v, a change of %s: synced %v, want %v", tc.kind, tc.ignoreStatusChanges, name, got, tc.synced[name])
			}
		}
	}
}
