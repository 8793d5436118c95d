package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// orphanedByKubectl deletes what with `kubectl delete --cascade=orphan`
// and waits until attachment, read by get, is owned by nobody: the garbage
// collector orphans it before the object goes.
func orphanedByKubectl(t *testing.T, attachment string, get func() (metav1.Object, error), what ...string) metav1.Object {
	t.Helper()
	args := append([]string{"delete", "--cascade=orphan", "--wait=true"}, what...)
	if out, errOut, err := suite.Kubectl(context.Background(), args...); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	var orphan metav1.Object
	suite.Eventually(t, attachment+" orphaned by the garbage collector", func() (bool, error) {
		var err error
		if orphan, err = get(); err != nil {
			return false, err
		}
		return len(orphan.GetOwnerReferences()) == 0, nil
	})
	return orphan
}

// assertLeftAlone fails unless the orphan still exists, with its UID and
// without a framework.HelloController, and no Event on the objects the decorator synced
// since says it was adopted or deleted.
func assertLeftAlone(t *testing.T, orphan metav1.Object, get func() (metav1.Object, error), eventsOn ...string) {
	t.Helper()
	got, err := get()
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("the orphaned attachment %s was deleted", orphan.GetName())
	case err != nil:
		t.Fatal(err)
	case got.GetUID() != orphan.GetUID() || metav1.GetControllerOf(got) != nil:
		t.Errorf("the orphaned attachment %s was taken: uid %s (was %s), controller %v", orphan.GetName(), got.GetUID(), orphan.GetUID(), metav1.GetControllerOf(got))
	}
	for i := 0; i+1 < len(eventsOn); i += 2 {
		for _, e := range events(t, eventsOn[i], eventsOn[i+1]) {
			if (strings.Contains(e, "ChildAdopted") || strings.Contains(e, "ChildDeleted")) && strings.Contains(e, orphan.GetName()) {
				t.Errorf("Event on %s: %s", eventsOn[i+1], e)
			}
		}
	}
}

// As Metacontroller (decorator getChildren keeps only the objects whose
// controller is the decorated object), a DecoratorController never adopts:
// an attachment carrying its annotation whose object was deleted with
// --cascade=orphan is left alone by the syncs of the other objects it
// decorates, neither adopted nor deleted. (A cluster-scoped decorated
// resource, whose syncs list attachments in every namespace, is a case of
// internal/reconcile's TestDecoratorNeverAdoptsOrphans: a CRD deleted with
// --cascade=orphan, crd-roles' example, has its ClusterRole deleted by
// kube-apiserver's CRD cleanup and the garbage collector, not orphaned.)
func TestDecoratorLeavesOrphanedAttachmentsAlone(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ctx := context.Background()

	t.Run("namespaced objects", func(t *testing.T) {
		const name = "decorate-orphans"
		ns := suite.Namespace(t, name)
		createDecoratorManifest(t, name, framework.DecoratorFixture{Name: name, HookURL: hook.URL, NoFinalize: true}.Manifest())
		for _, cm := range []string{"a", "b"} {
			if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: cm, Labels: map[string]string{"test": name}, Annotations: map[string]string{"attach": "x"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		a, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitAttachment(t, ns, "a-x", name, a)
		getAX := func() (metav1.Object, error) {
			return suite.Kube.CoreV1().Secrets(ns).Get(ctx, "a-x", metav1.GetOptions{})
		}
		orphan := orphanedByKubectl(t, "Secret a-x", getAX, "configmap", "a", "-n", ns)

		// b's next sync, seen done by the Event of the attachment it
		// creates: on it, today's main adopted a-x and deleted it.
		cur, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Annotations["attach"] = "x,y"
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		suite.WaitForEvent(t, ns, "b", "ChildCreated", "Secret "+ns+"/b-y", time.Minute)
		assertLeftAlone(t, orphan, getAX, ns, "b")
	})

}
