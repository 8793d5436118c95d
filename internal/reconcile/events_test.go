package reconcile

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apply"
)

// The spam filter keeps a bucket per parent and reason: a flood of one
// reason does not silence the others, and messages do not split buckets.
func TestSpamKeyByReason(t *testing.T) {
	ev := func(name, reason, msg string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Hello", Namespace: "ns", Name: name, UID: types.UID("u-" + name)},
			Type: corev1.EventTypeNormal, Reason: reason, Message: msg, Source: corev1.EventSource{Component: "composite-apiserver"}}
	}
	if spamKeyByReason(ev("p", "ChildCreated", "a")) != spamKeyByReason(ev("p", "ChildCreated", "b")) {
		t.Error("two messages of one reason have two buckets")
	}
	if spamKeyByReason(ev("p", "ChildCreated", "a")) == spamKeyByReason(ev("p", "RolloutWaiting", "a")) {
		t.Error("two reasons share a bucket")
	}
	if spamKeyByReason(ev("p", "ChildCreated", "a")) == spamKeyByReason(ev("q", "ChildCreated", "a")) {
		t.Error("two parents share a bucket")
	}
}

// One Event per action and reason: ten children created are one line that
// names five of them.
func TestGroupDone(t *testing.T) {
	var done []apply.Done
	for i := 0; i < 7; i++ {
		done = append(done, apply.Done{Action: v1alpha1.SyncActionCreate, Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("p-%d", i), Reason: "new"})
	}
	done = append(done,
		apply.Done{Action: v1alpha1.SyncActionDelete, Kind: "Service", Namespace: "ns", Name: "p", Reason: "gone"},
		apply.Done{Action: v1alpha1.SyncActionCreate, Kind: "Secret", Namespace: "ns", Name: "failed", Reason: "new", Err: errors.New("no")},
		apply.Done{Action: v1alpha1.SyncActionCreate, Kind: "Secret", Namespace: "ns", Name: "s", Reason: "other"},
	)
	var got []string
	for _, g := range groupDone(done) {
		got = append(got, g.message())
	}
	want := []string{
		"Create ConfigMap ns/p-0, ConfigMap ns/p-1, ConfigMap ns/p-2, ConfigMap ns/p-3, ConfigMap ns/p-4 and 2 more: new",
		"Delete Service ns/p: gone",
		"Create Secret ns/s: other",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%q\nwant\n%q", got, want)
	}
}

// budget allows its first n Events.
type budget struct{ n, asked int }

func (b *budget) Allow() bool {
	b.asked++
	return b.asked <= b.n
}

// Over Env.ChildEvents, what was done to children is not recorded; the
// failures are, and a dry run asks the budget nothing.
func TestDoneEventsWithinTheBudget(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Hello", "metadata": map[string]interface{}{"name": "p", "namespace": "ns"}}}
	done := []apply.Done{
		{Action: v1alpha1.SyncActionCreate, Kind: "ConfigMap", Namespace: "ns", Name: "p-a", Reason: "new"},
		{Action: v1alpha1.SyncActionDelete, Kind: "Service", Namespace: "ns", Name: "p", Reason: "gone"},
		{Action: v1alpha1.SyncActionCreate, Kind: "Secret", Namespace: "ns", Name: "p-s", Reason: "new", Err: errors.New("refused")},
	}
	c := &Controller{}
	recorder := record.NewFakeRecorder(10)
	b := &budget{n: 1}
	env := Env{Recorder: recorder, ChildEvents: b}
	c.doneEvents(env, Options{DryRun: true}, parent, done, errors.New("refused"))
	if b.asked != 0 || len(recorder.Events) != 0 {
		t.Fatalf("a dry run asked the budget %d times and recorded %d Events", b.asked, len(recorder.Events))
	}
	c.doneEvents(env, Options{}, parent, done, errors.New("refused"))
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	want := []string{
		"Warning ChildError can't Create Secret ns/p-s: refused",
		"Normal ChildCreated Create ConfigMap ns/p-a: new",
		"Warning SyncError refused",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Events with a budget of one\n%q\nwant\n%q", got, want)
	}
}
