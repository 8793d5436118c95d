package reconcile

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/apply"
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
