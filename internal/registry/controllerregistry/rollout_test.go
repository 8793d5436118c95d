package controllerregistry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/compositecontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry/registrytest"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/decoratorcontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// kind is one kind of controller on a real etcd, so that one table runs
// over both: what the rollout's admission decides is shared.
type kind struct {
	resource string
	// storage is the kind's main resource and its /status.
	storage func(t *testing.T, opts controllerregistry.Options) (*genericregistry.Store, *controllerregistry.StatusREST)
	// object is a valid controller with a rollout of three steps.
	object func(name string) runtime.Object
}

var kinds = []kind{
	{
		resource: "compositecontrollers",
		storage: func(t *testing.T, opts controllerregistry.Options) (*genericregistry.Store, *controllerregistry.StatusREST) {
			scheme, options := registrytest.RESTOptions(t, "compositecontrollers")
			s, err := compositecontroller.NewStorage(scheme, options, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.CompositeController.DestroyFunc)
			return s.CompositeController.Store, s.Status
		},
		object: func(name string) runtime.Object {
			return &metacontroller.CompositeController{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: metacontroller.CompositeControllerSpec{
					ParentResource: metacontroller.CompositeControllerParentResourceRule{ResourceRule: metacontroller.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
					ChildResources: []metacontroller.CompositeControllerChildResourceRule{{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
					Hooks:          &metacontroller.CompositeControllerHooks{Sync: &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr.To("http://hello.default/v1")}}},
					Rollout:        threeSteps(),
				},
			}
		},
	},
	{
		resource: "decoratorcontrollers",
		storage: func(t *testing.T, opts controllerregistry.Options) (*genericregistry.Store, *controllerregistry.StatusREST) {
			scheme, options := registrytest.RESTOptions(t, "decoratorcontrollers")
			s, err := decoratorcontroller.NewStorage(scheme, options, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.DecoratorController.DestroyFunc)
			return s.DecoratorController.Store, s.Status
		},
		object: func(name string) runtime.Object {
			return &metacontroller.DecoratorController{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: metacontroller.DecoratorControllerSpec{
					Resources:   []metacontroller.DecoratorControllerResourceRule{{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
					Attachments: []metacontroller.DecoratorControllerAttachmentRule{{ResourceRule: metacontroller.ResourceRule{APIVersion: "v1", Resource: "secrets"}}},
					Hooks:       &metacontroller.DecoratorControllerHooks{Sync: &metacontroller.Hook{Webhook: &metacontroller.Webhook{URL: ptr.To("http://decorate.default/v1")}}},
					Rollout:     threeSteps(),
				},
			}
		},
	},
}

func threeSteps() *metacontroller.ControllerRollout {
	return &metacontroller.ControllerRollout{Steps: []metacontroller.RolloutStep{
		{MaxParents: ptr.To[int32](1)}, {Percent: ptr.To[int32](50)}, {Percent: ptr.To[int32](100)},
	}}
}

// view points into a controller of either kind at what these tests read
// and change.
type view struct {
	rollout  **metacontroller.ControllerRollout
	limit    **int32
	hook     *string
	author   *metacontroller.ControllerAuthor
	revision int64
	history  []int64
	status   **metacontroller.RolloutStatus
}

func viewOf(obj runtime.Object) view {
	switch o := obj.(type) {
	case *metacontroller.CompositeController:
		v := view{rollout: &o.Spec.Rollout, limit: &o.Spec.RevisionHistoryLimit, hook: o.Spec.Hooks.Sync.Webhook.URL,
			author: o.Status.Author, revision: o.Status.Revision, status: &o.Status.Rollout}
		for _, h := range o.Status.History {
			v.history = append(v.history, h.Revision)
		}
		return v
	case *metacontroller.DecoratorController:
		v := view{rollout: &o.Spec.Rollout, limit: &o.Spec.RevisionHistoryLimit, hook: o.Spec.Hooks.Sync.Webhook.URL,
			author: o.Status.Author, revision: o.Status.Revision, status: &o.Status.Rollout}
		for _, h := range o.Status.History {
			v.history = append(v.history, h.Revision)
		}
		return v
	}
	panic(fmt.Sprintf("not a controller: %T", obj))
}

// warnings records what a request warns of, as the handler would send it.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) AddWarning(_, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// as is a request of user on the kind's resource, its warnings recorded
// in w (nil: none).
func (k kind) as(name string, w *warnings) context.Context {
	ctx := genericapirequest.WithNamespace(genericapirequest.NewContext(), metav1.NamespaceNone)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{APIGroup: v1alpha1.GroupName, APIVersion: "v1alpha1", Resource: k.resource})
	ctx = genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: name, Groups: []string{user.AllAuthenticated}})
	if w != nil {
		ctx = warning.WithWarningRecorder(ctx, w)
	}
	return ctx
}

// theServer is the loop's loopback client, which writes status.rollout.
const theServer = user.APIServerUser

// authors lets alice and carol do what a controller's loop does, and
// nobody else: bob may only patch the controller (which the handler
// checks, not the registry).
var authors = &rights.Escalation{Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if n := a.GetUser().GetName(); n == "alice" || n == "carol" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})}

func create(t *testing.T, ctx context.Context, store *genericregistry.Store, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := store.Create(ctx, obj, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return out
}

func update(ctx context.Context, updater rest.Updater, obj runtime.Object) (runtime.Object, error) {
	name := obj.(metav1.Object).GetName()
	out, _, err := updater.Update(ctx, name, rest.DefaultUpdatedObjectInfo(obj), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	return out, err
}

// edit writes a copy of obj changed by change, as user through updater.
func edit(t *testing.T, ctx context.Context, updater rest.Updater, obj runtime.Object, change func(obj runtime.Object, v view)) (runtime.Object, error) {
	t.Helper()
	changed := obj.DeepCopyObject()
	change(changed, viewOf(changed))
	return update(ctx, updater, changed)
}

// TestRolloutEditsNeedTheAuthorsRightsButPauseDoesNot: a change of
// spec.rollout's steps, health, onFailure or errorBudget, or adding or
// removing spec.rollout, decides what runs on every parent: it needs the
// rights writing the spec needs, refused with a 403 that names the rights
// missing, and keeps the author (R11). Pausing, resuming and the resume
// annotation need only patch, and keep the author: the on-call operator
// who pauses does not become the author.
func TestRolloutEditsNeedTheAuthorsRightsButPauseDoesNot(t *testing.T) {
	paused := func(_ runtime.Object, v view) { (*v.rollout).Paused = true }
	cases := []struct {
		name   string
		stored func(obj runtime.Object, v view)
		editor string
		change func(obj runtime.Object, v view)
		// refused: a 403 naming the rights missing.
		refused bool
	}{
		{name: "pause", editor: "bob", change: paused},
		{name: "resume, as kubectl composite rollout resume patches it", stored: paused, editor: "bob", change: func(obj runtime.Object, v view) {
			(*v.rollout).Paused = false
			obj.(metav1.Object).SetAnnotations(map[string]string{v1alpha1.RolloutResumedAnnotation: "2026-12-01T10:00:00Z"})
		}},
		{name: "the resume annotation", stored: paused, editor: "bob", change: func(obj runtime.Object, _ view) {
			obj.(metav1.Object).SetAnnotations(map[string]string{v1alpha1.RolloutResumedAnnotation: "2026-12-01T10:00:00Z"})
		}},
		{name: "steps", editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).Steps[0].MaxParents = ptr.To[int32](100)
		}},
		{name: "health condition", editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).Health = &metacontroller.RolloutHealth{Condition: ptr.To(`parent.metadata.name.startsWith("a")`)}
		}},
		{name: "onFailure", editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).OnFailure = ptr.To(metacontroller.RolloutRollback)
		}},
		{name: "errorBudget", editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).ErrorBudget = &metacontroller.RolloutErrorBudget{MaxSyncFailures: ptr.To[int32](1000)}
		}},
		{name: "a pause with a change of the steps", editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).Paused = true
			(*v.rollout).Steps = (*v.rollout).Steps[1:]
		}},
		{name: "adding spec.rollout", stored: func(_ runtime.Object, v view) { *v.rollout = nil }, editor: "bob", refused: true, change: func(_ runtime.Object, v view) {
			*v.rollout = threeSteps()
		}},
		{name: "removing spec.rollout", editor: "bob", refused: true, change: func(_ runtime.Object, v view) { *v.rollout = nil }},
		{name: "steps by an editor with the rights", editor: "carol", change: func(_ runtime.Object, v view) {
			(*v.rollout).Steps[0].MaxParents = ptr.To[int32](100)
		}},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(k.resource+"/"+c.name, func(t *testing.T) {
				store, _ := k.storage(t, controllerregistry.Options{Authors: authors})
				obj := k.object("edited")
				if c.stored != nil {
					c.stored(obj, viewOf(obj))
				}
				stored := create(t, k.as("alice", nil), store, obj)
				got, err := edit(t, k.as(c.editor, nil), store, stored, c.change)
				if c.refused {
					if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "you may not") {
						t.Fatalf("%s's edit: %v, want Forbidden naming the rights missing", c.editor, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s's edit: %v", c.editor, err)
				}
				if v := viewOf(got); v.author == nil || v.author.Username != "alice" || v.revision != 1 {
					t.Errorf("after %s's edit: author %+v, revision %d; want alice's revision 1", c.editor, v.author, v.revision)
				}
			})
		}
	}
}

// TestStatusRolloutIsTheServers: status.rollout chooses which revision
// runs which parents, so only the server's loop writes it; anyone else's
// write of it through /status is ignored, and the rest of their status
// write kept, as for the author and the history (R11).
func TestStatusRolloutIsTheServers(t *testing.T) {
	underWay := &metacontroller.RolloutStatus{CurrentRevision: 1, UpdateRevision: 1, Step: 1, Steps: 3, Phase: metacontroller.RolloutProgressing, Reason: "StepPassed"}
	forged := &metacontroller.RolloutStatus{CurrentRevision: 7, UpdateRevision: 1, Step: 3, Steps: 3, Phase: metacontroller.RolloutRolledBack}
	for _, k := range kinds {
		t.Run(k.resource, func(t *testing.T) {
			store, status := k.storage(t, controllerregistry.Options{})
			stored := create(t, k.as("alice", nil), store, k.object("status"))
			written, err := edit(t, k.as(theServer, nil), status, stored, func(_ runtime.Object, v view) { *v.status = underWay.DeepCopy() })
			if err != nil {
				t.Fatal(err)
			}
			if got := *viewOf(written).status; got == nil || got.Step != 1 || got.Reason != "StepPassed" {
				t.Fatalf("the server's write of status.rollout stored %+v, want %+v", got, underWay)
			}
			for _, r := range []*metacontroller.RolloutStatus{forged, nil} {
				got, err := edit(t, k.as("bob", nil), status, written, func(_ runtime.Object, v view) { *v.status = r.DeepCopy() })
				if err != nil {
					t.Fatalf("bob's status write: %v, want it stored without its rollout", err)
				}
				written = got
				if got := *viewOf(got).status; got == nil || got.CurrentRevision != 1 || got.Phase != metacontroller.RolloutProgressing {
					t.Errorf("bob wrote status.rollout %+v, and %+v was stored; want the server's kept", r, got)
				}
			}
		})
	}
}

// TestStepsCutMidRolloutAreRefused: cutting the steps of the revision
// whose rollout is under way to no more than status.rollout.step is
// refused with a field error naming status.rollout.step (R2); removing
// spec.rollout, or a new revision, is not.
func TestStepsCutMidRolloutAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		change  func(obj runtime.Object, v view)
		refused bool
	}{
		{name: "steps cut to the step under way", refused: true, change: func(_ runtime.Object, v view) {
			(*v.rollout).Steps = (*v.rollout).Steps[:1]
		}},
		{name: "steps cut, but past the step under way", change: func(_ runtime.Object, v view) {
			(*v.rollout).Steps = append((*v.rollout).Steps[:1:1], (*v.rollout).Steps[2])
		}},
		{name: "spec.rollout removed, which lands the revision", change: func(_ runtime.Object, v view) { *v.rollout = nil }},
		{name: "steps cut with a new revision, which begins at step 0", change: func(_ runtime.Object, v view) {
			*v.hook = "http://hooks.default/v2"
			(*v.rollout).Steps = (*v.rollout).Steps[2:]
		}},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(k.resource+"/"+c.name, func(t *testing.T) {
				store, status := k.storage(t, controllerregistry.Options{})
				stored := create(t, k.as("alice", nil), store, k.object("cut"))
				stored, err := edit(t, k.as(theServer, nil), status, stored, func(_ runtime.Object, v view) {
					*v.status = &metacontroller.RolloutStatus{CurrentRevision: 1, UpdateRevision: 1, Step: 1, Steps: 3, Phase: metacontroller.RolloutProgressing}
				})
				if err != nil {
					t.Fatal(err)
				}
				_, err = edit(t, k.as("alice", nil), store, stored, c.change)
				if !c.refused {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.rollout.steps") || !strings.Contains(err.Error(), "status.rollout.step (1)") {
					t.Fatalf("steps cut mid-rollout: %v, want Invalid on spec.rollout.steps naming status.rollout.step (1)", err)
				}
			})
		}
	}
}

// TestHistoryKeepsWhatARolloutRollsFrom: with spec.rollout, no
// revisionHistoryLimit trims the revision a rollout rolls from, which a
// limit of 0 did, landing every change on every parent at once (R3(c)),
// nor, with two writes before the loop reads the first, the revision the
// last rollout landed (R3(d)); a limit of 0 with a rollout is warned of.
// Without a rollout, the limit is the limit.
func TestHistoryKeepsWhatARolloutRollsFrom(t *testing.T) {
	landed := func(_ runtime.Object, v view) {
		*v.status = &metacontroller.RolloutStatus{CurrentRevision: 1, UpdateRevision: 1, Step: 3, Steps: 3, Phase: metacontroller.RolloutComplete}
	}
	cases := []struct {
		name    string
		rollout bool
		limit   int32
		// landed writes a complete rollout of revision 1 as the server.
		landed bool
		// want are the histories after each of two new revisions.
		want   [2][]int64
		warned bool
	}{
		{name: "limit 0 with a rollout keeps the revision replaced", rollout: true, limit: 0, want: [2][]int64{{1}, {2}}, warned: true},
		{name: "limit 0 without a rollout keeps nothing", limit: 0, want: [2][]int64{nil, nil}},
		{name: "limit 1 with two writes before the loop keeps the landed revision", rollout: true, limit: 1, landed: true, want: [2][]int64{{1}, {2, 1}}},
		{name: "limit 0 with two writes before the loop keeps the landed revision", rollout: true, limit: 0, landed: true, want: [2][]int64{{1}, {2, 1}}, warned: true},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(k.resource+"/"+c.name, func(t *testing.T) {
				store, status := k.storage(t, controllerregistry.Options{})
				obj := k.object("history")
				v := viewOf(obj)
				*v.limit = ptr.To(c.limit)
				if !c.rollout {
					*v.rollout = nil
				}
				w := &warnings{}
				stored := create(t, k.as("alice", w), store, obj)
				if warned := slices.ContainsFunc(w.text, func(s string) bool { return strings.HasPrefix(s, "spec.revisionHistoryLimit: ") }); warned != c.warned {
					t.Errorf("warnings %q; want one on spec.revisionHistoryLimit: %v", w.text, c.warned)
				}
				if c.landed {
					var err error
					if stored, err = edit(t, k.as(theServer, nil), status, stored, landed); err != nil {
						t.Fatal(err)
					}
				}
				for i, want := range c.want {
					var err error
					stored, err = edit(t, k.as("alice", nil), store, stored, func(_ runtime.Object, v view) { *v.hook = fmt.Sprintf("http://hooks.default/v%d", i+2) })
					if err != nil {
						t.Fatal(err)
					}
					if got := viewOf(stored); got.revision != int64(i+2) || !slices.Equal(got.history, want) {
						t.Errorf("after revision %d: revision %d, history %v; want %v", i+2, got.revision, got.history, want)
					}
				}
			})
		}
	}
}

// TestLargeSpecsTrimTheHistoryWithAWarning: revisions of large specs are
// dropped from status.history, the oldest first, beyond its byte budget,
// however many revisionHistoryLimit keeps (R20), and the write that drops
// them says which.
func TestLargeSpecsTrimTheHistoryWithAWarning(t *testing.T) {
	// Hooks of 200 KiB: the history's budget of 512 KiB holds two.
	hook := func(i int) string { return fmt.Sprintf("http://hooks.default/v%d/%s", i, strings.Repeat("x", 200<<10)) }
	for _, k := range kinds {
		t.Run(k.resource, func(t *testing.T) {
			store, _ := k.storage(t, controllerregistry.Options{})
			obj := k.object("large")
			*viewOf(obj).hook = hook(1)
			stored := create(t, k.as("alice", nil), store, obj)
			wants := []struct {
				history []int64
				warned  string
			}{
				{history: []int64{1}},
				{history: []int64{2, 1}},
				{history: []int64{3, 2}, warned: "status.history: revision 1 dropped"},
			}
			for i, want := range wants {
				w := &warnings{}
				var err error
				stored, err = edit(t, k.as("alice", w), store, stored, func(_ runtime.Object, v view) { *v.hook = hook(i + 2) })
				if err != nil {
					t.Fatal(err)
				}
				if got := viewOf(stored).history; !slices.Equal(got, want.history) {
					t.Errorf("revision %d: history %v, want %v", i+2, got, want.history)
				}
				trimmed := slices.ContainsFunc(w.text, func(s string) bool { return strings.HasPrefix(s, "status.history: ") })
				if want.warned == "" && trimmed || want.warned != "" && !slices.ContainsFunc(w.text, func(s string) bool { return strings.HasPrefix(s, want.warned) }) {
					t.Errorf("revision %d: warnings %q, want one beginning %q", i+2, w.text, want.warned)
				}
			}
		})
	}
}
