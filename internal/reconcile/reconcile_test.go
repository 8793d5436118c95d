package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var things = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}

const finalizer = "metacontroller.io/compositecontroller-things"

func controller(t *testing.T, finalize bool, mods ...func(*v1alpha1.CompositeController)) *Controller {
	t.Helper()
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "things"},
		Spec: v1alpha1.CompositeControllerSpec{
			GenerateSelector: ptr.To(true),
			ParentResource:   v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}},
			ChildResources:   []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Hooks:            &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{}},
		},
	}
	h := engine.Hooks{Sync: engine.InProcess(hookapi.SyncHookFunc(func(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"ok": true}}, nil
	}))}
	if finalize {
		cc.Spec.Hooks.Finalize = &v1alpha1.Hook{}
		h.Finalize = engine.InProcess(hookapi.SyncHookFunc(func(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
			return &hookapi.SyncHookResponse{Finalized: true, Status: map[string]interface{}{"finalizing": true}}, nil
		}))
	}
	for _, m := range mods {
		m(cc)
	}
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		t.Fatal(err)
	}
	return &Controller{Def: def, Hooks: h}
}

func parent(finalizers ...string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]interface{}{"name": "p", "namespace": "ns", "uid": "uid-p", "generation": int64(2), "labels": map[string]interface{}{"team": "a"}},
	}}
	if len(finalizers) > 0 {
		p.SetFinalizers(finalizers)
	}
	return p
}

type noObjects struct{}

func (noObjects) List(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return nil, nil
}
func (noObjects) Namespaces(context.Context, labels.Selector) ([]string, error) { return nil, nil }

func env(t *testing.T, objs ...runtime.Object) (Env, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{things: "ThingList", {Version: "v1", Resource: "configmaps"}: "ConfigMapList"}, objs...)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	return Env{Client: client, Resolver: definition.RESTMapperResolver(mapper), Children: noObjects{}, Related: noObjects{}}, client
}

// verbs lists the writes the client saw, as "verb resource[/subresource]".
func verbs(client *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		out = append(out, a.GetVerb()+" "+r)
	}
	return out
}

func TestSyncFinalizerRules(t *testing.T) {
	for _, tc := range []struct {
		name           string
		finalize       bool
		parent         *unstructured.Unstructured
		wantAdded      bool
		wantRemoved    bool
		wantFinalizing bool
	}{
		{name: "a controller with a finalize hook puts its finalizer on a live parent", finalize: true, parent: parent(), wantAdded: true},
		{name: "a controller without a finalize hook takes its finalizer off", finalize: false, parent: parent(finalizer), wantRemoved: true},
		{name: "even off a parent being deleted, which would otherwise hang in Terminating", finalize: false,
			parent: func() *unstructured.Unstructured {
				p := parent(finalizer, "other")
				p.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
				return p
			}(), wantRemoved: true},
		{name: "a parent being deleted is finalized, then its finalizer goes", finalize: true,
			parent: func() *unstructured.Unstructured {
				p := parent(finalizer, "other")
				p.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
				return p
			}(), wantRemoved: true, wantFinalizing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, client := env(t, tc.parent.DeepCopy())
			res, err := controller(t, tc.finalize).Sync(context.Background(), e, tc.parent, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.FinalizerAdded != tc.wantAdded || res.FinalizerRemoved != tc.wantRemoved {
				t.Errorf("finalizer added %v removed %v, want %v %v (writes %q)", res.FinalizerAdded, res.FinalizerRemoved, tc.wantAdded, tc.wantRemoved, verbs(client))
			}
			if res.Plan == nil || res.Plan.Finalizing != tc.wantFinalizing {
				t.Errorf("plan %+v, want finalizing %v", res.Plan, tc.wantFinalizing)
			}
		})
	}
}

func TestSyncWritesNothingForAParentItDoesNotSync(t *testing.T) {
	onlyTeamB := func(cc *v1alpha1.CompositeController) {
		cc.Spec.ParentResource.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	}
	p := parent()
	e, client := env(t, p.DeepCopy())
	res, err := controller(t, true, onlyTeamB).Sync(context.Background(), e, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped == "" || res.Plan != nil || len(verbs(client)) != 0 {
		t.Errorf("skipped %q, plan %v, writes %q: want nothing done", res.Skipped, res.Plan, verbs(client))
	}
}

func TestSyncWritesTheStatusOnlyWhenItChanges(t *testing.T) {
	p := parent()
	e, client := env(t, p.DeepCopy())
	c := controller(t, false)
	res, err := c.Sync(context.Background(), e, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StatusWritten {
		t.Fatalf("status not written (writes %q)", verbs(client))
	}
	converged, err := client.Resource(things).Namespace("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g, _, _ := unstructured.NestedInt64(converged.Object, "status", "observedGeneration"); g != 2 {
		t.Errorf("status %v: want observedGeneration 2", converged.Object["status"])
	}
	client.ClearActions()
	res, err = c.Sync(context.Background(), e, converged, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusWritten || len(verbs(client)) != 0 {
		t.Errorf("a converged parent was written: %q", verbs(client))
	}
}

// TestSyncAwaitsNoEchoOfAStatusWriteThatStoredNothing: when the parent's
// CRD prunes what the hook's status adds (observedGeneration, under a
// structural status schema), kube-apiserver stores nothing and answers
// with the resourceVersion read; no watch event follows. The loop must not
// await one (it would resync the parent when the wait timed out, and write
// the same again, forever): the write is not among ParentWrites.
func TestSyncAwaitsNoEchoOfAStatusWriteThatStoredNothing(t *testing.T) {
	p := parent()
	p.SetResourceVersion("5")
	p.Object["status"] = map[string]interface{}{"ok": true}
	e, client := env(t, p.DeepCopy())
	client.PrependReactor("update", "things", func(a k8stesting.Action) (bool, runtime.Object, error) {
		stored := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		stored.Object["status"] = map[string]interface{}{"ok": true}
		return true, stored, nil
	})
	res, err := controller(t, false).Sync(context.Background(), e, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(verbs(client)) != "[update things/status]" {
		t.Fatalf("writes %q; want the status write (its observedGeneration differs)", verbs(client))
	}
	if res.StatusWritten || len(res.ParentWrites) != 0 {
		t.Fatalf("StatusWritten %v, ParentWrites %v: a write that stored nothing is awaited as an echo", res.StatusWritten, res.ParentWrites)
	}
}

func TestSyncDryRunWritesNothing(t *testing.T) {
	p := parent()
	e, client := env(t, p.DeepCopy())
	res, err := controller(t, true).Sync(context.Background(), e, p, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan == nil || len(verbs(client)) != 0 {
		t.Errorf("plan %v, writes %q", res.Plan, verbs(client))
	}
	if len(res.Warnings) == 0 {
		t.Errorf("no warning that a live sync would add the finalizer")
	}
}

func TestRequeueAfter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		period      *int32
		resyncAfter float64
		finalizing  bool
		recheck     time.Duration
		want        time.Duration
	}{
		{name: "nothing asked: only on change", want: 0},
		{name: "the hook's resyncAfterSeconds", resyncAfter: 2.5, want: 2500 * time.Millisecond},
		{name: "resyncPeriodSeconds alone", period: ptr.To[int32](30), want: 30 * time.Second},
		{name: "the smaller of the two wins", period: ptr.To[int32](30), resyncAfter: 600, want: 30 * time.Second},
		{name: "resyncPeriodSeconds 0 means every second, as Metacontroller clamps it", period: ptr.To[int32](0), want: time.Second},
		{name: "an unfinished finalize comes back soon", finalizing: true, want: finalizingResync},
		{name: "the plan's recheck comes before the period", period: ptr.To[int32](30), recheck: time.Second, want: time.Second},
		{name: "the plan's recheck alone", recheck: time.Second, want: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := controller(t, false, func(cc *v1alpha1.CompositeController) { cc.Spec.ResyncPeriodSeconds = tc.period })
			plan := &engine.Plan{Finalizing: tc.finalizing, Recheck: tc.recheck, Response: &hookapi.SyncHookResponse{ResyncAfterSeconds: tc.resyncAfter}}
			if got := c.requeueAfter(plan); got != tc.want {
				t.Errorf("requeueAfter %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAPreviewAsksTheClusterNothing: a preview (DryRun) of a parent whose
// child differs goes by the local merge and sends no dry-run apply, so
// that one preview costs about one hook call; a live sync of the same
// parent asks the cluster before it updates the child.
func TestAPreviewAsksTheClusterNothing(t *testing.T) {
	child := func(color string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": "c", "namespace": "ns", "uid": "uid-c", "resourceVersion": "5",
				"labels":          map[string]interface{}{"controller-uid": "uid-p"},
				"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Thing", "name": "p", "uid": "uid-p", "controller": true}}},
			"data": map[string]interface{}{"color": color},
		}}
	}
	for _, tc := range []struct {
		name      string
		dryRun    bool
		wantAsked bool
	}{
		{"a preview", true, false},
		{"a live sync", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parent()
			e, client := env(t, p.DeepCopy(), child("red"))
			e.Children = someObjects{child("red")}
			asked := false
			client.PrependReactor("patch", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				asked = asked || a.(k8stesting.PatchAction).GetPatchType() == "application/apply-patch+yaml"
				return true, nil, apierrors.NewServiceUnavailable("not in this test")
			})
			c := controller(t, false, func(cc *v1alpha1.CompositeController) {
				cc.Spec.ChildResources[0].UpdateStrategy = &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace}
			})
			c.Hooks.Sync = engine.InProcess(hookapi.SyncHookFunc(func(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
				return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{child("blue")}}, nil
			}))
			// A live sync stops once planned: what it writes is not the
			// question.
			stop := func(context.Context, *engine.Plan) error { return errors.New("planned") }
			res, _ := c.Sync(context.Background(), e, p, Options{DryRun: tc.dryRun, Allow: stop})
			if res.Plan == nil || len(res.Plan.Items) != 1 || res.Plan.Items[0].Action != v1alpha1.SyncActionUpdate {
				t.Fatalf("plan %+v, want the child updated", res.Plan)
			}
			if asked != tc.wantAsked {
				t.Errorf("asked the cluster %v, want %v", asked, tc.wantAsked)
			}
		})
	}
}

type someObjects []*unstructured.Unstructured

func (o someObjects) List(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return o, nil
}
func (someObjects) Namespaces(context.Context, labels.Selector) ([]string, error) { return nil, nil }

// TestAdoptionRereadThatFailsFailsTheSync: before adopting an orphan the
// parent is read again; when that read fails, nothing says whether the
// parent may adopt, so the sync fails (and is retried with backoff)
// instead of going on as if the orphan were not its to take.
func TestAdoptionRereadThatFailsFailsTheSync(t *testing.T) {
	p := parent()
	orphan := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "p-orphan", "namespace": "ns", "uid": "uid-o", "labels": map[string]interface{}{"controller-uid": "uid-p"}},
	}}
	e, client := env(t, p.DeepCopy(), orphan.DeepCopy())
	e.Children = someObjects{orphan}
	client.PrependReactor("get", "things", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	_, err := controller(t, false).Sync(context.Background(), e, p, Options{})
	if err == nil || !strings.Contains(err.Error(), "again before adopting") || len(verbs(client)) != 0 {
		t.Fatalf("Sync: %v, writes %q; want the sync to fail before any write", err, verbs(client))
	}
}
