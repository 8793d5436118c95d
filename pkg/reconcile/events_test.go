package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
