package parentloop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/expectations"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// process syncs the parent of key, taken from the controller's queue as
// qkey (Run.processNext), and queues it again as the sync says.
func (pc *parentLoop) process(ctx context.Context, qkey, key string) {
	// loopCtx is the loop's: it outlives this sync, for the expectations'
	// timeout.
	loopCtx := ctx
	ctx, done, ok := syncgate.Admit(ctx, pc.shards, pc.queue, qkey)
	if !ok {
		return
	}
	defer done()
	give, err := pc.cfg.Gate.Turn(ctx, pc.rec.Def.Parent.GVR.GroupResource(), key)
	if err != nil {
		// The loop stops, or the shard was lost, while a live /sync of
		// the parent ran.
		return
	}
	defer give()
	logger := klog.FromContext(ctx).WithValues("parent", key)
	if pc.view != "" {
		logger = logger.WithValues("resource", pc.view)
	}
	ctx = klog.NewContext(ctx, logger)

	start := time.Now()
	deferredLast := pc.expectations.Begin(key)
	requeueAfter, writes, err := pc.recoveredSync(ctx, key, !deferredLast)
	if err != nil {
		writes = nil
	}
	if again, waiting := pc.expectations.Finish(key, writes); again {
		pc.enqueue(key)
	} else if waiting {
		pc.checkExpectations(loopCtx, key)
	}
	syncLatency.WithLabelValues(pc.key).Observe(time.Since(start).Seconds())
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		// The shard was lost mid-sync (admit): its next owner syncs the
		// parent again. Not the hook's failure, nor the controller's.
		logger.Info("Sync abandoned: this replica no longer owns the parent's shard", "cause", cause)
		pc.queue.Forget(qkey)
		return
	}
	pc.status.Synced(key, err)
	pc.requeue(logger, qkey, requeueAfter, err)
}

// PanicError is a panic recovered in a controller's sync: the sync failed,
// and is retried with backoff like any failed sync; the server goes on.
type PanicError struct {
	Recovered interface{}
	Stack     []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Recovered) }

// recoveredSync is sync, with a panic recovered as a *PanicError, as
// controller-runtime's RecoverPanic does: one controller's bug (or one
// parent's shape that a hook answer makes it meet) must not end the
// process that serves the API and every other controller. The locks a sync
// takes are released by its defers while the panic unwinds.
func (pc *parentLoop) recoveredSync(ctx context.Context, key string, mayDefer bool) (_ time.Duration, _ *expectations.Writes, err error) {
	defer func() {
		if r := recover(); r != nil {
			perr := &PanicError{Recovered: r, Stack: debug.Stack()}
			klog.FromContext(ctx).Error(perr, "Recovered a panic in a sync; retrying with backoff", "stack", string(perr.Stack))
			CountPanic(pc.key)
			pc.status.Panicked(key, perr)
			err = perr
		}
	}()
	requeueAfter, writes, err := pc.sync(ctx, key, mayDefer)
	pc.status.Panicked(key, nil)
	return requeueAfter, writes, err
}

// requeue queues the parent of qkey again as its sync ended: after
// requeueAfter, when the hook asks, after Retry-After when it throttles,
// with backoff when the sync failed.
func (pc *parentLoop) requeue(logger klog.Logger, qkey string, requeueAfter time.Duration, err error) {
	var tooMany *hooks.TooManyRequestsError
	switch {
	case err == nil:
		syncsTotal.WithLabelValues(pc.key, "success").Inc()
		pc.queue.Forget(qkey)
		if requeueAfter > 0 {
			pc.queue.AddAfter(qkey, requeueAfter)
		}
	case errors.As(err, &tooMany):
		// The hook said when to come back; that is not a failure to back
		// off from.
		syncsTotal.WithLabelValues(pc.key, "throttled").Inc()
		logger.V(2).Info("Hook asked to retry later", "retryAfter", tooMany.RetryAfter)
		pc.queue.Forget(qkey)
		pc.queue.AddAfter(qkey, max(tooMany.RetryAfter, time.Second))
	default:
		syncsTotal.WithLabelValues(pc.key, "error").Inc()
		logger.Error(err, "Sync failed; retrying with backoff")
		pc.queue.AddRateLimited(qkey)
	}
}

// checkExpectations queues the parent of key if the echoes of its sync's
// writes have not all arrived within the expectations' timeout, unless the
// loop (ctx) has ended by then.
func (pc *parentLoop) checkExpectations(ctx context.Context, key string) {
	time.AfterFunc(pc.expectations.Timeout(), func() {
		if ctx.Err() == nil && pc.expectations.Expire(key) {
			pc.enqueue(key)
		}
	})
}

// sync runs the shared reconcile step for the parent of key, read from the
// informer: level-based, it reads everything again on every sync. It
// returns the writes it made (for the expectations). mayDefer lets it
// leave the status to the sync that follows the echoes of its child
// writes.
func (pc *parentLoop) sync(ctx context.Context, key string, mayDefer bool) (time.Duration, *expectations.Writes, error) {
	parent, err := pc.parent(key)
	if parent == nil || err != nil {
		return 0, nil, err
	}
	if !pc.rec.Def.Handles(parent) {
		// A child's ownerReference queued a parent another controller
		// of the same resource handles: reconcile skips it, and nothing
		// of it may be checked or said here.
		return 0, nil, nil
	}
	if !pc.runs(parent) {
		// Another revision of the controller syncs it (a rollout).
		return 0, nil, nil
	}
	if paused(parent) {
		return 0, nil, pc.markPaused(ctx, parent)
	}
	if beforeSync != nil {
		beforeSync(parent)
	}
	if err := pc.checkActor(ctx, parent); err != nil {
		pc.status.Authorized(err)
		pc.cfg.Recorder.Event(parent, corev1.EventTypeWarning, "Forbidden", err.Error())
		return 0, nil, err
	}
	res, err := pc.rec.Sync(ctx, pc.env(), parent, reconcile.Options{
		StatusAfterChildEchoes: mayDefer && !pc.rec.Def.IgnoreOwnChildWrites,
		Encodings:              pc.encodings.Parent(key),
	})
	if res.Plan != nil || err != nil {
		pc.status.HookCalled(err)
		pc.revisionSynced(parent, res, err)
	}
	pc.authorized(parent, err)
	if pc.cfg.Unchanged != nil {
		for _, d := range res.Done {
			if d.Err == nil {
				pc.cfg.Unchanged.Applied(d.Stored.Body, d.Stored.UID, d.Stored.ResourceVersion, pc.rec.Def.FieldManager)
			}
		}
	}
	writes := writesOf(res.Done, res.ParentWrites)
	writes.StatusDeferred = res.StatusDeferred
	if err == nil && len(writes.Children) == 0 && len(writes.Parent) == 0 {
		// Converged: no echo of this sync will call the hook again, and
		// the next sync, whenever something changes, may be hours away.
		// Keeping the children's encodings only while a parent's writes
		// are in flight bounds them by the parents converging, not by
		// every parent.
		pc.encodings.Forget(key)
	}
	if err != nil {
		return 0, writes, err
	}
	return res.RequeueAfter, writes, nil
}

// parent is a copy of the parent of key from the informer's cache; nil
// when it is gone (its children go with it through their
// ownerReferences) or key is no parent's.
func (pc *parentLoop) parent(key string) (*unstructured.Unstructured, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil
	}
	var obj interface{}
	if pc.namespaced {
		obj, err = pc.parents.Lister().ByNamespace(namespace).Get(name)
	} else {
		obj, err = pc.parents.Lister().Get(name)
	}
	if apierrors.IsNotFound(err) {
		pc.expectations.Forget(key)
		pc.encodings.Forget(key)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj.(*unstructured.Unstructured).DeepCopy(), nil
}

// env is what a sync reads and writes through: the shared informers, and
// the identity's clients when the controller has one.
func (pc *parentLoop) env() reconcile.Env {
	lister := sharedinformers.NewLister(pc.children, pc.relatedInformer)
	related := &rights.RelatedLister{ObjectLister: lister, Access: pc.cfg.Access, Subjects: pc.actor.Readers}
	client, meta := pc.cfg.Dynamic, pc.cfg.Metadata
	if c := pc.actor.Clients; c != nil {
		client, meta = c.Dynamic, c.Metadata
	}
	return reconcile.Env{
		Client:    client,
		Metadata:  meta,
		Resolver:  definition.RESTMapperResolver(pc.cfg.Discovery),
		Children:  lister,
		Index:     lister,
		Related:   related,
		Recorder:  pc.cfg.Recorder,
		Revisions: reconcile.ClientRevisions{Client: client},
		Ownership: pc.cfg.Ownership(),
		// A nil *Budget (--child-events-qps=0) allows every Event.
		ChildEvents: pc.childEvents,
	}
}

// authorized records whether the sync of parent, which ended with err,
// was allowed all it did.
func (pc *parentLoop) authorized(parent *unstructured.Unstructured, err error) {
	var refused *rights.ForbiddenError
	switch {
	case errors.As(err, &refused):
		// A related list refused: the sync stopped before the sync hook,
		// so that no child is deleted for want of what it was made from.
		msg := "sync hook not called, nothing changed: " + refused.Error()
		pc.status.Authorized(errors.New(msg))
		pc.cfg.Recorder.Event(parent, corev1.EventTypeWarning, "RelatedForbidden", msg)
	case apierrors.IsForbidden(err):
		pc.status.Authorized(err)
	case err == nil:
		pc.status.Authorized(nil)
	}
}

// checkActor refuses a sync its identity could not make: one whose
// ServiceAccount is gone, or that may not list the parent's or children's
// resources in the parent's namespace.
func (pc *parentLoop) checkActor(ctx context.Context, parent *unstructured.Unstructured) error {
	sa := pc.actor.Subject.ServiceAccount
	if sa == nil {
		return nil
	}
	if err := pc.cfg.Identity.ServiceAccountExists(ctx, *sa); err != nil {
		return err
	}
	return pc.cfg.Access.CheckReads(ctx, pc.actor.Subject, pc.rec.Def, parent.GetNamespace())
}

// writesOf are the writes, for the expectations, of a sync's done
// children whose echoes the loop can tell (apply.Done.Wrote: creates and
// updates by the resourceVersion stored, deletions by the child's name),
// and its parent writes.
func writesOf(done []apply.Done, parent []reconcile.ParentWrite) *expectations.Writes {
	w := &expectations.Writes{}
	for _, p := range parent {
		if p.ResourceVersion != "" {
			w.Parent = append(w.Parent, expectations.ParentWrite{ResourceVersion: p.ResourceVersion, Answer: p.Answer})
		}
	}
	for _, d := range done {
		if !d.Wrote() {
			continue
		}
		child := expectations.Child{Group: d.GVR.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
		if d.Action == v1alpha1.SyncActionCreate || d.Action == v1alpha1.SyncActionUpdate {
			w.Children = append(w.Children, expectations.ChildWrite{Child: child, ResourceVersion: d.Stored.ResourceVersion})
		} else {
			w.Children = append(w.Children, expectations.ChildWrite{Child: child})
		}
	}
	return w
}
