package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// decoratorAnnotation is Metacontroller's mark of a decorator's
// attachments.
const decoratorAnnotation = "metacontroller.k8s.io/decorator-controller"

// createDecorator applies framework.DecoratorFixture name and waits until
// its loop runs.
func createDecorator(t *testing.T, name, hookURL string) {
	t.Helper()
	createDecoratorManifest(t, name, framework.DecoratorFixture{Name: name, HookURL: hookURL}.Manifest())
}

// createDecoratorManifest applies manifest, the DecoratorController name,
// and waits until its loop runs.
func createDecoratorManifest(t *testing.T, name, manifest string) {
	t.Helper()
	suite.ApplyDecorator(t, name, manifest)
	suite.Eventually(t, "DecoratorController "+name+" Ready", func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().DecoratorControllers().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) && got.Status.ObservedGeneration == got.Generation, nil
	})
}

// decorated waits for obj (of gvr) to carry the hook's label and
// annotation, and returns it.
func waitDecorated(t *testing.T, get func() (metav1.Object, error)) metav1.Object {
	t.Helper()
	var obj metav1.Object
	suite.Eventually(t, "the hook's label and annotation", func() (bool, error) {
		var err error
		if obj, err = get(); err != nil {
			return false, err
		}
		return obj.GetLabels()["decorated"] == "yes" && obj.GetAnnotations()["decorated-by"] == "hook.py", nil
	})
	return obj
}

// waitAttachment waits for the Secret name, owned by owner and marked as
// the decorator's, and returns it.
func waitAttachment(t *testing.T, ns, name, ctrl string, owner metav1.Object) *corev1.Secret {
	t.Helper()
	var secret *corev1.Secret
	suite.Eventually(t, "attachment "+name, func() (bool, error) {
		var err error
		secret, err = suite.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return framework.OwnedBy(secret, owner) && secret.Annotations[decoratorAnnotation] == ctrl && string(secret.Data["object"]) == owner.GetName(), nil
	})
	return secret
}

func annotate(annotations map[string]string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { u.SetAnnotations(annotations) }
}

func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	suite.Eventually(t, what+" gone", func() (bool, error) {
		err := get()
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// A DecoratorController decorates the objects of a CRD and of a built-in
// kind that its selectors match: the hook's label and annotation, a status
// where the kind has one, an attachment per object, a label removed when
// the hook answers null, an attachment deleted when no longer returned, the
// finalize hook on deletion; objects outside its selectors are never sent
// to the hook.
func TestDecoratorDecoratesMatchingObjects(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	const name = "decorate"
	ns := suite.Namespace(t, "decorate")
	createDecorator(t, name, hook.URL)
	ctx := context.Background()

	// Created first, outside the selectors: a Hello of another test and a
	// ConfigMap without the annotation the selector asks for.
	outside := suite.CreateHello(t, ns, "outside", "another-test", map[string]interface{}{})
	unannotated, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "unannotated", Labels: map[string]string{"test": name}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	hello := suite.CreateHello(t, ns, "h", name, map[string]interface{}{}, annotate(map[string]string{"attach": "a"}))
	cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "c", Labels: map[string]string{"test": name, "stale": "yes"},
		Annotations: map[string]string{"attach": "b", "drop-label": "stale"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a CRD's object gets the label, annotation, status and attachment", func(t *testing.T) {
		waitDecorated(t, func() (metav1.Object, error) {
			return suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "h", metav1.GetOptions{})
		})
		waitAttachment(t, ns, "h-a", name, hello)
		suite.Eventually(t, "the hook's status on the Hello", func() (bool, error) {
			got, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "h", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			decorated, _, _ := unstructured.NestedBool(got.Object, "status", "decorated")
			attachments, _, _ := unstructured.NestedInt64(got.Object, "status", "attachments")
			_, hasGeneration, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "observedGeneration")
			return decorated && attachments == 1 && !hasGeneration, nil
		})
	})
	t.Run("a ConfigMap gets the label and annotation, loses the label answered null, and gets its attachment", func(t *testing.T) {
		got := waitDecorated(t, func() (metav1.Object, error) {
			return suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
		})
		if _, has := got.GetLabels()["stale"]; has {
			// Set and removed in one patch, so seen together.
			t.Errorf("the label answered null is still there: %v", got.GetLabels())
		}
		waitAttachment(t, ns, "c-b", name, cm)
	})
	t.Run("objects outside the selectors are not sent to the hook", func(t *testing.T) {
		// Their informer events came before those of the objects decorated
		// above, and were filtered by the same handler.
		calls, err := hook.Calls()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []metav1.Object{outside, unannotated} {
			if n := calls["/decorate "+ns+"/"+o.GetName()]; n != 0 {
				t.Errorf("the hook was called %d times for %s, outside the selectors", n, o.GetName())
			}
		}
		got, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "outside", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetLabels()["decorated"] != "" || len(got.GetFinalizers()) != 0 {
			t.Errorf("the Hello outside the selectors was decorated: %v, %v", got.GetLabels(), got.GetFinalizers())
		}
	})
	t.Run("an attachment no longer returned is deleted", func(t *testing.T) {
		cur, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Annotations["attach"] = ""
		if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "Secret c-b", func() error {
			_, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "c-b", metav1.GetOptions{})
			return err
		})
	})
	t.Run("deleting a decorated object runs the finalize hook", func(t *testing.T) {
		got, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "h", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "metacontroller.io/decoratorcontroller-" + name; len(got.GetFinalizers()) != 1 || got.GetFinalizers()[0] != want {
			t.Fatalf("finalizers %v, want %s", got.GetFinalizers(), want)
		}
		if err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Delete(ctx, "h", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "Hello h", func() error {
			_, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "h", metav1.GetOptions{})
			return err
		})
		calls, err := hook.Calls()
		if err != nil {
			t.Fatal(err)
		}
		if calls["/decorate-finalize "+ns+"/h"] == 0 {
			t.Errorf("the Hello went without a call of the finalize hook: %v", calls)
		}
		waitGone(t, "Secret h-a", func() error {
			_, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "h-a", metav1.GetOptions{})
			return err
		})
	})
	t.Run("Events and metrics say what the loop did", func(t *testing.T) {
		suite.WaitForEvent(t, ns, "c", "ChildCreated", "Create Secret "+ns+"/c-b", time.Minute)
		suite.WaitForEvent(t, ns, "c", "ChildDeleted", "Delete Secret "+ns+"/c-b", time.Minute)
		// A cluster-scoped object's Events are in the default namespace.
		dc, err := suite.Client.MetacontrollerV1alpha1().DecoratorControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitControllerEvent(t, dc.UID, "Started", "Started controller: "+name)
		m := suite.CompositeGet(t, "/metrics")
		if !strings.Contains(m, `composite_controller_syncs_total{controller="decoratorcontroller/`+name+`",result="success"}`) {
			t.Errorf("/metrics has no successful syncs of the decorator")
		}
		// Metacontroller's name for its hook calls.
		if !strings.Contains(m, `metacontroller_sync_requests_total{code="200",controller_name="`+name+`",controller_type="DecoratorController"`) {
			t.Errorf("/metrics has no metacontroller_sync_requests_total of the decorator")
		}
	})
	t.Run("the DecoratorController's status counts what it decorates", func(t *testing.T) {
		suite.Eventually(t, "status.objects 1 (the ConfigMap)", func() (bool, error) {
			got, err := suite.Client.MetacontrollerV1alpha1().DecoratorControllers().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Objects == 1 && got.Status.LastSyncTime != nil, nil
		})
	})
	// The ConfigMap carries the finalizer: delete it while the loop runs.
	if err := suite.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "ConfigMap c", func() error {
		_, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
		return err
	})
}

// An object whose attachments Metacontroller wrote (its annotation, the
// object as framework.HelloController, its field manager) keeps them: they are adopted in
// place, not recreated, and brought to what the hook answers.
func TestDecoratorAdoptsMetacontrollersAttachments(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	const name = "decorate-migrate"
	ns := suite.Namespace(t, "decorate-migrate")
	ctx := context.Background()
	hello := suite.CreateHello(t, ns, "m", name, map[string]interface{}{}, annotate(map[string]string{"attach": "a"}))
	// As Metacontroller left it: applied by its field manager, with an
	// older value than the hook answers now.
	written, err := suite.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "m-a", Annotations: map[string]string{decoratorAnnotation: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Hello", Name: "m", UID: hello.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}, Data: map[string][]byte{"object": []byte("written by Metacontroller")}}, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}

	createDecorator(t, name, hook.URL)
	adopted := waitAttachment(t, ns, "m-a", name, hello)
	if adopted.UID != written.UID {
		t.Errorf("the attachment was recreated: UID %s, was %s", adopted.UID, written.UID)
	}
	// The hook saw it as the object's attachment.
	suite.Eventually(t, "the hook's status counting the adopted attachment", func() (bool, error) {
		got, err := suite.Dynamic.Resource(framework.Hellos).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(got.Object, "status", "attachments")
		return n == 1, nil
	})
}
