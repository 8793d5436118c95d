package reconcile

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewEventBroadcaster is the Event broadcaster of a sync's Events. Its
// spam filter (client-go's: a burst of 25 Events, then one per 5 minutes)
// counts each reason of each parent apart, where client-go's counts every
// Event of a parent together: otherwise a parent's first two dozen Events
// (children created, a few SyncErrors) would silence what comes later,
// such as the steps and stalls of a rolling update, for minutes. qps and
// burst change those figures (--events-qps, --events-burst); zero keeps
// client-go's, which are Metacontroller's too.
func NewEventBroadcaster(ctx context.Context, qps float32, burst int) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		SpamKeyFunc: spamKeyByReason, QPS: qps, BurstSize: burst,
	}))
}

func spamKeyByReason(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason,
	}, "\x00")
}
