package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
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

// computeFailedEvent records why no plan was computed. A hook that asked
// to be called again later (HTTP 429) is back-pressure, not a failure: the
// hook said when to come back.
func (c *Controller) computeFailedEvent(env Env, opts Options, parent *unstructured.Unstructured, err error) {
	var throttled retryAfterError
	if errors.As(err, &throttled) {
		c.event(env, opts, parent, corev1.EventTypeNormal, "HookThrottled", fmt.Sprintf("the hook asked to be called again in %s", throttled.RetryDelay()))
		return
	}
	c.event(env, opts, parent, corev1.EventTypeWarning, "SyncError", err.Error())
}

// retryAfterError is a hook's answer asking to be called again after a
// delay, 0 when it did not say (*hooks.TooManyRequestsError).
type retryAfterError interface {
	error
	RetryDelay() time.Duration
}

// planEvents records the plan's warnings, and the children it leaves alone
// because another controller has them.
func (c *Controller) planEvents(env Env, opts Options, parent *unstructured.Unstructured, plan *engine.Plan) {
	for _, w := range plan.Warnings {
		c.event(env, opts, parent, corev1.EventTypeWarning, "SyncWarning", w)
	}
	for _, item := range plan.Items {
		if item.Reason == engine.ReasonForeign {
			// The sample-controller's word for it.
			c.event(env, opts, parent, corev1.EventTypeWarning, "ErrResourceExists",
				fmt.Sprintf("%s %s exists and is not controlled by %s %s; it is left alone", item.Desired.GetKind(), item.Desired.GetName(), parent.GetKind(), parent.GetName()))
		}
	}
}

// doneEvents records what was done to children: an Event per failure, one
// per group of children with the same thing done for the same reason
// (within Env.ChildEvents), and a SyncError when anything failed.
func (c *Controller) doneEvents(env Env, opts Options, parent *unstructured.Unstructured, done []apply.Done, applyErr error) {
	for _, d := range done {
		if d.Err != nil {
			c.event(env, opts, parent, corev1.EventTypeWarning, "ChildError", fmt.Sprintf("can't %s: %v", d, d.Err))
		}
	}
	for _, g := range groupDone(done) {
		if env.Recorder != nil && !opts.DryRun && env.ChildEvents != nil && !env.ChildEvents.Allow() {
			continue
		}
		c.event(env, opts, parent, corev1.EventTypeNormal, eventReasons[g.action], g.message())
	}
	if applyErr != nil {
		// Metacontroller's Event for any failed sync, besides the
		// per-child ones: alerts on reason=SyncError see child failures.
		c.event(env, opts, parent, corev1.EventTypeWarning, "SyncError", applyErr.Error())
	}
}

// EventBudget decides whether one more routine Event may be recorded now
// (Env.ChildEvents; eventbudget.Budget is the loop's).
type EventBudget interface {
	Allow() bool
}

// eventReasons name the Events of what a sync did to children.
var eventReasons = map[v1alpha1.SyncAction]string{
	v1alpha1.SyncActionCreate:   "ChildCreated",
	v1alpha1.SyncActionUpdate:   "ChildUpdated",
	v1alpha1.SyncActionRecreate: "ChildRecreating",
	v1alpha1.SyncActionDelete:   "ChildDeleted",
	v1alpha1.SyncActionAdopt:    "ChildAdopted",
	v1alpha1.SyncActionOrphan:   "ChildReleased",
	apply.ActionTakeOver:        "ChildTakenOver",
}

// doneGroup is what one Event says: children that had the same thing done
// to them, for the same reason, in one sync.
type doneGroup struct {
	action v1alpha1.SyncAction
	reason string
	what   []string
}

// eventNames is how many children one Event names before "and N more".
const eventNames = 5

// message is one line: what was done to which children, and why.
func (g doneGroup) message() string {
	names := g.what
	more := ""
	if len(names) > eventNames {
		more = fmt.Sprintf(" and %d more", len(names)-eventNames)
		names = names[:eventNames]
	}
	msg := string(g.action) + " " + strings.Join(names, ", ") + more
	if g.reason != "" {
		msg += ": " + g.reason
	}
	return msg
}

// groupDone groups what was done to children by action and reason, in the
// order it was done: a parent's 10 new children are one Event, not 10, so
// that Events do not double the writes a sync makes to the cluster (client-
// go's correlator would only start combining them after the tenth).
func groupDone(done []apply.Done) []doneGroup {
	var groups []doneGroup
	index := map[[2]string]int{}
	for _, d := range done {
		if d.Err != nil {
			continue
		}
		key := [2]string{string(d.Action), d.Reason}
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, doneGroup{action: d.Action, reason: d.Reason})
		}
		groups[i].what = append(groups[i].what, d.Child())
	}
	return groups
}

// rolloutEvent records a step of a rolling update, or the start of a stall
// or of the end, once: when the parent's Updated condition changes.
func (c *Controller) rolloutEvent(env Env, opts Options, parent *unstructured.Unstructured, r *engine.Rollout) {
	if r == nil {
		return
	}
	prev := engine.StatusCondition(parent, engine.UpdatedCondition)
	if prev != nil && prev["reason"] == r.Reason && prev["message"] == r.Message {
		return
	}
	switch r.Reason {
	case engine.ReasonRolloutProgressing:
		c.event(env, opts, parent, corev1.EventTypeNormal, r.Reason, fmt.Sprintf("%s moves to ControllerRevision %s", r.Next, r.Latest))
	case engine.ReasonRolloutWaiting:
		c.event(env, opts, parent, corev1.EventTypeWarning, r.Reason, "rolling update halted: "+r.Message)
	case engine.ReasonOnLatestRevision:
		if prev != nil {
			c.event(env, opts, parent, corev1.EventTypeNormal, "RolloutComplete", "every child is on ControllerRevision "+r.Latest)
		}
	}
}

func (c *Controller) event(env Env, opts Options, parent *unstructured.Unstructured, eventType, reason, message string) {
	if env.Recorder == nil || opts.DryRun {
		return
	}
	env.Recorder.Event(parent, eventType, reason, message)
}

func describeController(obj metav1.Object) string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	}
	return "another controller"
}
