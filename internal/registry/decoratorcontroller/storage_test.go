package decoratorcontroller

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry/registrytest"
)

func newStorage(t *testing.T, opts Options) *Storage {
	t.Helper()
	scheme, options := registrytest.RESTOptions(t, "decoratorcontrollers")
	storage, err := NewStorage(scheme, options, opts)
	if err != nil {
		t.Fatalf("NewStorage: %v", err)
	}
	t.Cleanup(func() { storage.DecoratorController.DestroyFunc() })
	return storage
}

func decorator(name string) *metacontroller.DecoratorController {
	return &metacontroller.DecoratorController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: metacontroller.DecoratorControllerSpec{
			Resources: []metacontroller.DecoratorControllerResourceRule{{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Attachments: []metacontroller.DecoratorControllerAttachmentRule{{
				ResourceRule:   metacontroller.ResourceRule{APIVersion: "v1", Resource: "secrets"},
				UpdateStrategy: &metacontroller.DecoratorControllerAttachmentUpdateStrategy{Method: metacontroller.ChildUpdateInPlace},
			}},
			Hooks: &metacontroller.DecoratorControllerHooks{Sync: &metacontroller.Hook{
				Version: ptr.To(metacontroller.HookVersionV1),
				Webhook: &metacontroller.Webhook{URL: ptr.To("http://decorate.default/sync")},
			}},
		},
	}
}

func requestCtx() context.Context {
	ctx := genericapirequest.WithNamespace(genericapirequest.NewContext(), metav1.NamespaceNone)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{APIGroup: v1alpha1.GroupName, APIVersion: "v1alpha1", Resource: "decoratorcontrollers"})
}

func TestGenericRegistryBehaviour(t *testing.T) {
	tester := func(t *testing.T) *genericregistrytest.Tester {
		return genericregistrytest.New(t, newStorage(t, Options{}).DecoratorController.Store).ClusterScope()
	}
	invalid := decorator("invalid")
	invalid.Spec.Resources = nil
	t.Run("create", func(t *testing.T) {
		dc := decorator("")
		dc.GenerateName = "create-"
		tester(t).TestCreate(dc, invalid)
	})
	t.Run("update", func(t *testing.T) {
		tester(t).TestUpdate(decorator("update"),
			func(obj runtime.Object) runtime.Object {
				obj.(*metacontroller.DecoratorController).Spec.ResyncPeriodSeconds = ptr.To[int32](60)
				return obj
			},
			func(obj runtime.Object) runtime.Object {
				obj.(*metacontroller.DecoratorController).Spec.Hooks = nil
				return obj
			})
	})
	t.Run("get", func(t *testing.T) { tester(t).TestGet(decorator("get")) })
	t.Run("list", func(t *testing.T) { tester(t).TestList(decorator("list")) })
}

// The status is the server's: reset on create, kept by spec updates, which
// bump the generation; /status changes nothing else.
func TestStatusIsTheServers(t *testing.T) {
	storage := newStorage(t, Options{})
	dc := decorator("status")
	dc.Status.Objects = 4
	obj, err := storage.DecoratorController.Create(requestCtx(), dc, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*metacontroller.DecoratorController)
	if created.Status.Objects != 0 || created.Generation != 1 {
		t.Fatalf("created with status %+v, generation %d; want none and 1", created.Status, created.Generation)
	}

	in := created.DeepCopy()
	in.Status.Objects = 3
	in.Spec.Resources[0].Resource = "changed"
	in.Labels = map[string]string{"sneaky": "label"}
	obj, _, err = storage.Status.Update(requestCtx(), in.Name, rest.DefaultUpdatedObjectInfo(in), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withStatus := obj.(*metacontroller.DecoratorController)
	if withStatus.Status.Objects != 3 || withStatus.Spec.Resources[0].Resource != "configmaps" || len(withStatus.Labels) != 0 {
		t.Fatalf("/status wrote %+v, resources %v, labels %v; want only the status", withStatus.Status, withStatus.Spec.Resources, withStatus.Labels)
	}

	in = withStatus.DeepCopy()
	in.Spec.ResyncPeriodSeconds = ptr.To[int32](30)
	in.Status.Objects = 99
	obj, _, err = storage.DecoratorController.Update(requestCtx(), in.Name, rest.DefaultUpdatedObjectInfo(in), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*metacontroller.DecoratorController); got.Status.Objects != 3 || got.Generation != 2 {
		t.Errorf("after a spec update: status %+v, generation %d; want the stored status and 2", got.Status, got.Generation)
	}
}

type refusingAuthor struct{ checked []string }

func (a *refusingAuthor) CheckAuthor(ctx context.Context, controller runtime.Object) error {
	dc := controller.(*v1alpha1.DecoratorController)
	a.checked = append(a.checked, dc.Spec.Attachments[0].Resource)
	return apierrors.NewForbidden(v1alpha1.Resource("decoratorcontrollers"), dc.Name, errors.New("you may not create secrets"))
}

// The author check runs on the versioned object a user wrote, on create.
func TestAuthorCheck(t *testing.T) {
	author := &refusingAuthor{}
	storage := newStorage(t, Options{Authors: author})
	_, err := storage.DecoratorController.Create(requestCtx(), decorator("refused"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "you may not create secrets") {
		t.Fatalf("create by an author without the rights: %v, want Forbidden", err)
	}
	if len(author.checked) != 1 || author.checked[0] != "secrets" {
		t.Errorf("checked %v", author.checked)
	}
}

func TestTable(t *testing.T) {
	dc := decorator("table")
	dc.Status.Objects = 2
	table, err := tableConvertor.ConvertToTable(context.Background(), dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	row := table.Rows[0].Cells
	want := []interface{}{"table", "v1/configmaps", "secrets", "http://decorate.default/sync", "Unknown", int64(2)}
	for i, w := range want {
		if row[i] != w {
			t.Errorf("column %s = %v, want %v", table.ColumnDefinitions[i].Name, row[i], w)
		}
	}
}
