package compositecontroller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

func as(t *testing.T, name string) context.Context {
	return genericapirequest.WithUser(ctx(t), &user.DefaultInfo{Name: name, UID: name + "-uid", Groups: []string{"team"}, Extra: map[string][]string{"scopes": {"a"}}})
}

// The author of a controller is whoever last wrote its spec, as the request
// said, never as the client wrote it: not in the body, not through /status,
// not by a write that changes only metadata.
func TestTheServerRecordsWhoWroteTheSpec(t *testing.T) {
	storage := newStorage(t)
	in := validCompositeController("authored")
	in.Status.Author = &metacontroller.ControllerAuthor{Username: "forged"}
	obj, err := storage.CompositeController.Create(as(t, "alice"), in, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*metacontroller.CompositeController)
	if a := created.Status.Author; a == nil || a.Username != "alice" || a.UID != "alice-uid" || len(a.Groups) != 1 || a.Extra["scopes"][0] != "a" {
		t.Fatalf("author after create = %+v, want alice as the request said", a)
	}

	write := func(ctx context.Context, updater rest.Updater, cc *metacontroller.CompositeController) *metacontroller.CompositeController {
		t.Helper()
		obj, _, err := updater.Update(ctx, cc.Name, rest.DefaultUpdatedObjectInfo(cc), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*metacontroller.CompositeController)
	}
	// Through /status, bob cannot make himself the author.
	forged := created.DeepCopy()
	forged.Status.Author = &metacontroller.ControllerAuthor{Username: "bob"}
	if got := write(as(t, "bob"), storage.Status, forged); got.Status.Author.Username != "alice" {
		t.Errorf("a status write changed the author to %q", got.Status.Author.Username)
	}
	// A label is not the spec.
	labelled := created.DeepCopy()
	labelled.ResourceVersion = ""
	labelled.Labels = map[string]string{"team": "b"}
	if got := write(as(t, "bob"), storage.CompositeController, labelled); got.Status.Author.Username != "alice" {
		t.Errorf("a metadata write changed the author to %q", got.Status.Author.Username)
	}
	// A spec change makes its writer the author.
	changed := created.DeepCopy()
	changed.ResourceVersion = ""
	changed.Spec.ResyncPeriodSeconds = ptr.To[int32](30)
	if got := write(as(t, "carol"), storage.CompositeController, changed); got.Status.Author.Username != "carol" {
		t.Errorf("after carol changed the spec the author is %q", got.Status.Author.Username)
	}
}

// A controller stored before authors were recorded takes as author whoever
// passes the author checks and writes it again, but never the server
// itself: its decorator loop labelling the controller, say, would otherwise
// make the controller run with the server's rights (T12).
func TestTheServerWritingALegacyControllerDoesNotBecomeItsAuthor(t *testing.T) {
	const self = "system:serviceaccount:composite-system:composite-apiserver"
	s := NewStrategy(nil)
	s.authors = controllerregistry.Authors{Self: func(context.Context) (string, error) { return self, nil }}
	s.mayAuthor = func(context.Context, runtime.Object) bool { return true }
	for _, c := range []struct {
		writer, want string
	}{
		{writer: self},
		{writer: user.APIServerUser},
		{writer: "alice", want: "alice"},
	} {
		t.Run(c.writer, func(t *testing.T) {
			old := validCompositeController("legacy")
			labelled := old.DeepCopy()
			labelled.Labels = map[string]string{"decorated": "yes"}
			s.PrepareForUpdate(genericapirequest.WithUser(ctx(t), &user.DefaultInfo{Name: c.writer}), labelled, old)
			got := labelled.Status.Author
			if c.want == "" && got != nil {
				t.Errorf("%s labelling a controller without an author made itself its author", got.Username)
			}
			if c.want != "" && (got == nil || got.Username != c.want) {
				t.Errorf("author = %+v, want %s", got, c.want)
			}
		})
	}
}

// The server numbers a controller's revisions and keeps the specs they
// replaced with their authors, in the write of the spec: a status writer
// can neither forge an earlier revision (whose hooks would run as its
// recorded author) nor renumber them, and a change of spec.rollout alone
// is no revision and keeps the author.
func TestRevisionsAreTheServersAndCannotBeForged(t *testing.T) {
	storage := newStorage(t)
	obj, err := storage.CompositeController.Create(as(t, "alice"), validCompositeController("revised"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*metacontroller.CompositeController)
	if created.Status.Revision != 1 || len(created.Status.History) != 0 {
		t.Fatalf("after create: revision %d, history %d; want 1 and none", created.Status.Revision, len(created.Status.History))
	}
	write := func(ctx context.Context, updater rest.Updater, cc *metacontroller.CompositeController) *metacontroller.CompositeController {
		t.Helper()
		obj, _, err := updater.Update(ctx, cc.Name, rest.DefaultUpdatedObjectInfo(cc), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*metacontroller.CompositeController)
	}
	changed := created.DeepCopy()
	changed.Spec.ResyncPeriodSeconds = ptr.To[int32](30)
	changed = write(as(t, "carol"), storage.CompositeController, changed)
	if h := changed.Status.History; changed.Status.Revision != 2 || len(h) != 1 || h[0].Revision != 1 || h[0].Author.Username != "alice" || h[0].Spec.ResyncPeriodSeconds != nil {
		t.Fatalf("after a spec change: revision %d, history %+v; want 2, with alice's revision 1", changed.Status.Revision, h)
	}

	forged := changed.DeepCopy()
	forged.Status.Revision = 7
	forged.Status.History[0].Author = &metacontroller.ControllerAuthor{Username: "bob", Groups: []string{"system:masters"}}
	forged.Status.History[0].Spec.Hooks.Sync.Webhook.URL = ptr.To("http://bob.example/sync")
	got := write(as(t, "bob"), storage.Status, forged)
	if h := got.Status.History[0]; got.Status.Revision != 2 || h.Author.Username != "alice" || *h.Spec.Hooks.Sync.Webhook.URL == "http://bob.example/sync" {
		t.Errorf("a status write changed the revisions: revision %d, history[0] by %s calling %s", got.Status.Revision, h.Author.Username, *h.Spec.Hooks.Sync.Webhook.URL)
	}

	paused := got.DeepCopy()
	paused.Spec.Rollout = &metacontroller.ControllerRollout{Steps: []metacontroller.RolloutStep{{Percent: ptr.To[int32](50)}}, Paused: true}
	paused = write(as(t, "dave"), storage.CompositeController, paused)
	if paused.Status.Revision != 2 || len(paused.Status.History) != 1 || paused.Status.Author.Username != "carol" || paused.Generation != got.Generation+1 {
		t.Errorf("after a change of spec.rollout alone: revision %d, history %d, author %s, generation %d; want revision 2 by carol, a new generation",
			paused.Status.Revision, len(paused.Status.History), paused.Status.Author.Username, paused.Generation)
	}
}
