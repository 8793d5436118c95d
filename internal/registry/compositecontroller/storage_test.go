package compositecontroller

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry/registrytest"
)

// newStorage returns the registry on a real etcd, started for the test.
func newStorage(t *testing.T) *Storage {
	t.Helper()
	scheme, options := registrytest.RESTOptions(t, "compositecontrollers")
	storage, err := NewStorage(scheme, options, Options{})
	if err != nil {
		t.Fatalf("NewStorage: %v", err)
	}
	t.Cleanup(func() { storage.CompositeController.DestroyFunc() })
	return storage
}

func validCompositeController(name string) *metacontroller.CompositeController {
	return &metacontroller.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: metacontroller.CompositeControllerSpec{
			ParentResource: metacontroller.CompositeControllerParentResourceRule{
				ResourceRule: metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"},
			},
			ChildResources: []metacontroller.CompositeControllerChildResourceRule{{
				ResourceRule:   metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
				UpdateStrategy: &metacontroller.CompositeControllerChildUpdateStrategy{Method: metacontroller.ChildUpdateInPlace},
			}},
			Hooks: &metacontroller.CompositeControllerHooks{
				Sync: &metacontroller.Hook{
					Version: ptr.To(metacontroller.HookVersionV1),
					Webhook: &metacontroller.Webhook{URL: ptr.To("http://hello.default/sync")},
				},
			},
		},
	}
}

func ctx(t *testing.T) context.Context {
	return genericapirequest.WithRequestInfo(genericapirequest.WithNamespace(genericapirequest.NewContext(), metav1.NamespaceNone), &genericapirequest.RequestInfo{
		APIGroup: v1alpha1.GroupName, APIVersion: "v1alpha1", Resource: "compositecontrollers",
	})
}

func TestGenericRegistryBehaviour(t *testing.T) {
	// Each case gets its own etcd: the generic tests reuse names.
	test := func(t *testing.T) *genericregistrytest.Tester {
		return genericregistrytest.New(t, newStorage(t).CompositeController.Store).ClusterScope()
	}
	invalid := validCompositeController("invalid")
	invalid.Spec.Hooks = nil

	t.Run("create", func(t *testing.T) {
		cc := validCompositeController("")
		cc.GenerateName = "create-"
		test(t).TestCreate(cc, invalid)
	})
	t.Run("update", func(t *testing.T) {
		test(t).TestUpdate(validCompositeController("update"),
			func(obj runtime.Object) runtime.Object {
				cc := obj.(*metacontroller.CompositeController)
				cc.Spec.ResyncPeriodSeconds = ptr.To[int32](60)
				return cc
			},
			func(obj runtime.Object) runtime.Object {
				cc := obj.(*metacontroller.CompositeController)
				cc.Spec.ParentResource.Resource = ""
				return cc
			})
	})
	t.Run("delete", func(t *testing.T) { test(t).ReturnDeletedObject().TestDelete(validCompositeController("delete")) })
	t.Run("get", func(t *testing.T) { test(t).TestGet(validCompositeController("get")) })
	t.Run("list", func(t *testing.T) { test(t).TestList(validCompositeController("list")) })
	t.Run("watch", func(t *testing.T) {
		test(t).TestWatch(validCompositeController("watch"),
			[]labels.Set{}, // matching labels
			[]labels.Set{{"a": "c"}, {"foo": "bar"}},
			[]fields.Set{{"metadata.name": "watch"}},
			[]fields.Set{{"metadata.name": "other"}},
		)
	})
}

func TestCreateResetsStatusAndStartsGenerationAtOne(t *testing.T) {
	storage := newStorage(t)
	cc := validCompositeController("reset")
	cc.Generation = 7
	cc.Status = metacontroller.CompositeControllerStatus{ObservedGeneration: 9, Parents: 4, LastSyncError: "made up"}

	obj, err := storage.CompositeController.Create(ctx(t), cc, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got := obj.(*metacontroller.CompositeController)
	if got.Generation != 1 {
		t.Errorf("generation = %d, want 1", got.Generation)
	}
	if got.Status.ObservedGeneration != 0 || got.Status.Parents != 0 || got.Status.LastSyncError != "" {
		t.Errorf("status was kept on create: %+v", got.Status)
	}
}

func TestSpecUpdateKeepsStatusAndBumpsGenerationOnlyOnSpecChange(t *testing.T) {
	storage := newStorage(t)
	created := create(t, storage, validCompositeController("gen"))
	withStatus := updateStatus(t, storage, created, func(s *metacontroller.CompositeControllerStatus) { s.Parents = 3 })

	// A metadata-only change keeps the generation.
	labelled := withStatus.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	labelled = update(t, storage.CompositeController, labelled)
	if labelled.Generation != 1 {
		t.Errorf("generation after a label change = %d, want 1", labelled.Generation)
	}

	// A spec change bumps it, and a status sent along is ignored.
	changed := labelled.DeepCopy()
	changed.Spec.ResyncPeriodSeconds = ptr.To[int32](30)
	changed.Status.Parents = 99
	changed = update(t, storage.CompositeController, changed)
	if changed.Generation != 2 {
		t.Errorf("generation after a spec change = %d, want 2", changed.Generation)
	}
	if changed.Status.Parents != 3 {
		t.Errorf("status.parents = %d after a spec update, want the stored 3", changed.Status.Parents)
	}
}

func TestStatusUpdateChangesNothingButStatus(t *testing.T) {
	storage := newStorage(t)
	created := create(t, storage, validCompositeController("status"))

	in := created.DeepCopy()
	in.Spec.ParentResource.Resource = "changed"
	in.Labels = map[string]string{"sneaky": "label"}
	in.Status.ObservedGeneration = 1
	in.Status.Parents = 5
	meta.SetStatusCondition(&in.Status.Conditions, metav1.Condition{
		Type: metacontroller.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running", Message: "loop runs",
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)), ObservedGeneration: 1,
	})
	got := update(t, storage.Status, in)

	if got.Spec.ParentResource.Resource != "hellos" {
		t.Errorf("status update changed spec.parentResource.resource to %q", got.Spec.ParentResource.Resource)
	}
	if len(got.Labels) != 0 {
		t.Errorf("status update changed labels to %v", got.Labels)
	}
	if got.Generation != 1 {
		t.Errorf("status update changed generation to %d", got.Generation)
	}
	if got.Status.Parents != 5 || !meta.IsStatusConditionTrue(got.Status.Conditions, metacontroller.ConditionReady) {
		t.Errorf("status not written: %+v", got.Status)
	}
}

func TestInvalidStatusIsRejected(t *testing.T) {
	storage := newStorage(t)
	created := create(t, storage, validCompositeController("badstatus"))
	in := created.DeepCopy()
	in.Status.Parents = -1
	_, _, err := storage.Status.Update(ctx(t), in.Name, rest.DefaultUpdatedObjectInfo(in), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error for status.parents=-1, got %v", err)
	}
}

func TestStaleResourceVersionConflicts(t *testing.T) {
	storage := newStorage(t)
	created := create(t, storage, validCompositeController("conflict"))

	first := created.DeepCopy()
	first.Spec.ResyncPeriodSeconds = ptr.To[int32](10)
	update(t, storage.CompositeController, first)

	stale := created.DeepCopy() // still carries the first resourceVersion
	stale.Spec.ResyncPeriodSeconds = ptr.To[int32](20)
	_, _, err := storage.CompositeController.Update(ctx(t), stale.Name, rest.DefaultUpdatedObjectInfo(stale), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: want Conflict, got %v", err)
	}

	staleStatus := created.DeepCopy()
	staleStatus.Status.Parents = 1
	_, _, err = storage.Status.Update(ctx(t), staleStatus.Name, rest.DefaultUpdatedObjectInfo(staleStatus), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("status update with a stale resourceVersion: want Conflict, got %v", err)
	}
}

func TestStatusSubresourceCannotCreate(t *testing.T) {
	storage := newStorage(t)
	cc := validCompositeController("ghost")
	_, _, err := storage.Status.Update(ctx(t), cc.Name, rest.DefaultUpdatedObjectInfo(cc), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("status update of a missing object: want NotFound, got %v", err)
	}
}

func TestTableShowsColumnsAUserReads(t *testing.T) {
	storage := newStorage(t)
	cc := create(t, storage, validCompositeController("table"))
	cc = updateStatus(t, storage, cc, func(s *metacontroller.CompositeControllerStatus) {
		s.Parents = 2
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: metacontroller.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running"})
	})
	table, err := storage.CompositeController.ConvertToTable(ctx(t), cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"Name": "table", "Parent": "example.com/v1/hellos", "Children": "configmaps",
		"Sync Hook": "http://hello.default/sync", "Ready": "True", "Parents": int64(2),
		"Customize Hook": "<none>", "Last Sync": "<never>",
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %d, want 1", len(table.Rows))
	}
	for i, col := range table.ColumnDefinitions {
		if w, ok := want[col.Name]; ok && table.Rows[0].Cells[i] != w {
			t.Errorf("column %q = %#v, want %#v", col.Name, table.Rows[0].Cells[i], w)
		}
	}
}

func create(t *testing.T, storage *Storage, cc *metacontroller.CompositeController) *metacontroller.CompositeController {
	t.Helper()
	obj, err := storage.CompositeController.Create(ctx(t), cc, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", cc.Name, err)
	}
	return obj.(*metacontroller.CompositeController)
}

func update(t *testing.T, updater rest.Updater, cc *metacontroller.CompositeController) *metacontroller.CompositeController {
	t.Helper()
	obj, _, err := updater.Update(ctx(t), cc.Name, rest.DefaultUpdatedObjectInfo(cc), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update %s: %v", cc.Name, err)
	}
	return obj.(*metacontroller.CompositeController)
}

func updateStatus(t *testing.T, storage *Storage, cc *metacontroller.CompositeController, mutate func(*metacontroller.CompositeControllerStatus)) *metacontroller.CompositeController {
	t.Helper()
	in := cc.DeepCopy()
	mutate(&in.Status)
	return update(t, storage.Status, in)
}

// TestVersionChangeDropsADefaultedDecodingMode: a controller stored by an
// older server carries the decoding mode that server defaulted (loose, for
// v1); an update that switches the hook to v2 and leaves that mode as it
// was drops it, so that the v2 hook decodes strictly, as its version says.
// A mode that is not its old version's default is the author's, and kept.
func TestVersionChangeDropsADefaultedDecodingMode(t *testing.T) {
	storage := newStorage(t)
	for _, tc := range []struct {
		name     string
		stored   metacontroller.ResponseUnmarshallMode
		wantKept bool
	}{
		{"a defaulted loose mode goes with v1", metacontroller.ResponseUnmarshallModeLoose, false},
		{"an author's strict mode on v1 stays", metacontroller.ResponseUnmarshallModeStrict, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := validCompositeController("mode-" + string(tc.stored))
			v1 := metacontroller.HookVersionV1
			cc.Spec.Hooks.Sync.Version = &v1
			cc.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode = ptr.To(tc.stored)
			created := create(t, storage, cc)
			switched := created.DeepCopy()
			v2 := metacontroller.HookVersionV2
			switched.Spec.Hooks.Sync.Version = &v2
			switched = update(t, storage.CompositeController, switched)
			mode := switched.Spec.Hooks.Sync.Webhook.ResponseUnMarshallMode
			if kept := mode != nil && *mode == tc.stored; kept != tc.wantKept {
				t.Fatalf("responseUnMarshallMode after switching to v2: %v, want kept %v", mode, tc.wantKept)
			}
		})
	}
}
