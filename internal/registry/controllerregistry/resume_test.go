package controllerregistry_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// resumeAt writes the resume annotation as a client whose clock is skew
// off writes it.
func resumeAt(obj runtime.Object, skew time.Duration) {
	m := obj.(metav1.Object)
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.RolloutResumedAnnotation] = time.Now().Add(skew).UTC().Format(time.RFC3339Nano)
	m.SetAnnotations(a)
}

// resumedAt is the stored resume annotation, and whether there is one.
func resumedAt(obj runtime.Object) (string, bool) {
	v, ok := obj.(metav1.Object).GetAnnotations()[v1alpha1.RolloutResumedAnnotation]
	return v, ok
}

// checkServersTime fails unless obj's resume annotation is a time within
// a few seconds of now: the server's time of the write, not the client's.
func checkServersTime(t *testing.T, obj runtime.Object, write string) {
	t.Helper()
	v, ok := resumedAt(obj)
	at, err := time.Parse(time.RFC3339Nano, v)
	if !ok || err != nil {
		t.Fatalf("%s stored the resume annotation %q (present: %v): %v", write, v, ok, err)
	}
	if skew := time.Since(at); skew.Abs() > 5*time.Second {
		t.Errorf("%s stored the resume annotation %s, %v off the server's clock; want the server's time of the write", write, v, skew)
	}
}

// TestResumeIsStampedWithTheServersClock: the rollout compares the resume
// annotation with status.rollout.pausedTime, the server's time, so a write
// that sets or changes the annotation stores the server's time of the
// write, whatever the client's clock said: a clock an hour ahead would
// resume every failure of the next hour, one an hour behind no failure
// (R16). A write that leaves it as stored keeps it; one that removes it
// removes it.
func TestResumeIsStampedWithTheServersClock(t *testing.T) {
	paused := func(_ runtime.Object, v view) { (*v.rollout).Paused = true }
	cases := []struct {
		name string
		// created is the skew of the client clock that creates the
		// controller with the annotation; nil creates it without one.
		created *time.Duration
		// change is the update after the create, by bob, who may only
		// patch.
		change func(obj runtime.Object, v view)
		// want is what the update stores: "stamped" the server's time,
		// "kept" the annotation stored before, "removed" none.
		want string
	}{
		{name: "a resume an hour ahead, as kubectl composite rollout resume patches it", change: func(obj runtime.Object, v view) {
			(*v.rollout).Paused = false
			resumeAt(obj, time.Hour)
		}, want: "stamped"},
		{name: "a resume an hour behind", change: func(obj runtime.Object, _ view) { resumeAt(obj, -time.Hour) }, want: "stamped"},
		{name: "created an hour ahead, resumed an hour behind", created: ptr.To(time.Hour), change: func(obj runtime.Object, _ view) {
			resumeAt(obj, -time.Hour)
		}, want: "stamped"},
		{name: "created an hour behind, resumed an hour ahead", created: ptr.To(-time.Hour), change: func(obj runtime.Object, _ view) {
			resumeAt(obj, time.Hour)
		}, want: "stamped"},
		{name: "a pause leaves the stored resume", created: ptr.To(time.Hour), change: paused, want: "kept"},
		{name: "a label leaves the stored resume", created: ptr.To(-time.Hour), change: func(obj runtime.Object, _ view) {
			obj.(metav1.Object).SetLabels(map[string]string{"team": "a"})
		}, want: "kept"},
		{name: "removing the resume removes it", created: ptr.To(time.Hour), change: func(obj runtime.Object, _ view) {
			obj.(metav1.Object).SetAnnotations(nil)
		}, want: "removed"},
	}
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(k.resource+"/"+c.name, func(t *testing.T) {
				store, _ := k.storage(t, controllerregistry.Options{Authors: authors})
				obj := k.object("resumed")
				if c.created != nil {
					resumeAt(obj, *c.created)
				}
				stored := create(t, k.as("alice", nil), store, obj)
				if c.created != nil {
					checkServersTime(t, stored, "the create")
				}
				before, _ := resumedAt(stored)
				got, err := edit(t, k.as("bob", nil), store, stored, c.change)
				if err != nil {
					t.Fatalf("bob's update: %v", err)
				}
				after, present := resumedAt(got)
				switch c.want {
				case "stamped":
					checkServersTime(t, got, "the update")
				case "kept":
					checkServersTime(t, got, "the update")
					if after != before {
						t.Errorf("an update that left the resume annotation %s stored %s; want it kept", before, after)
					}
				case "removed":
					if present {
						t.Errorf("an update that removed the resume annotation stored %q; want none", after)
					}
				}
			})
		}
	}
}
