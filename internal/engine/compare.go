package engine

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
)

// reasonMovedOn is the reason of a child left alone by this sync because
// the API server holds a newer version of it than the sync read.
const reasonMovedOn = "changed on the API server since this sync read it; the sync that change brings decides"

// movedOnRecheck is how soon a parent is synced again when a child moved on
// and the controller ignores its own child writes
// (spec.ownChildWrites: Ignore): the newer version may be this loop's own
// write, whose echo syncs nothing, and the change this sync left alone
// would wait for the next resync. The echo is usually in the cache within
// a fraction of a second.
const movedOnRecheck = time.Second

// comparedPair names one comparison of a sync: a desired object, as the
// hook (or the revision the child follows) returned it, the child, and
// whether the target cluster may be asked.
type comparedPair struct {
	desired, observed *unstructured.Unstructured
	askServer         bool
}

// comparison is what compareChild found, and the reason to give a child
// it leaves alone without comparing it, if any.
type comparison struct {
	fieldowner.Result
	Reason string
}

// dryRunMemo remembers the target cluster's answers (*fieldowner.Unchanged,
// the loop's FieldOwnership): one question about a child at one
// resourceVersion with one desired object is asked once. Without it every
// sync asks again.
type dryRunMemo interface {
	DryRunAnswer(observed, desired *unstructured.Unstructured, manager string) (fieldowner.Result, bool)
}

// compareChild tells whether applying d would change the child obs, the
// one rule by which every update strategy, the rolling update's steps and
// checks, and so the loop, /sync and the fleet preview decide. It is
// kube-apiserver's field manager's rule (fieldowner.Compare): a change of a
// value the controller sets, a field it owns and stops setting, which the
// apply prunes, a change of the fields it owns; what others set or own is
// not a difference. The local merge cannot see what the server does after
// it: defaulting and admission that alter what the hook set, such as the
// tolerations DefaultTolerationSeconds appends to a Pod's, or a default
// inside a list that apply replaces whole. So when it finds a change and
// askServer (the item would act on it, and no takeover patch has to go
// first), the target cluster is asked, with a dry run of the very apply,
// and its answer decides (fieldowner.CompareDryRun). A converged child
// costs no request; a child that differs costs one dry run per change of
// it or of its desired object, as the FieldOwnership remembers the answers
// (dryRunMemo).
func (c *computation) compareChild(ctx context.Context, d desiredChild, obs *unstructured.Unstructured, askServer bool) comparison {
	key := comparedPair{d.obj, obs, askServer}
	if r, ok := c.compared[key]; ok {
		return r
	}
	r := c.compare(ctx, d, obs, askServer)
	c.compared[key] = r
	return r
}

func (c *computation) compare(ctx context.Context, d desiredChild, obs *unstructured.Unstructured, askServer bool) comparison {
	// What the apply will send: compared, dry-run and digested, never
	// changed.
	want := WithOwnerReferences(d.obj, ChildOwnerReferences(c.in.Parent, d.obj))
	manager := c.in.Definition.FieldManager
	askServer = askServer && obs.GetUID() != ""
	if memo, ok := c.in.ownership().(dryRunMemo); ok && askServer {
		// Free to look up, so a preview, which asks the target cluster
		// nothing, shows what the loop learnt from it too.
		if res, known := memo.DryRunAnswer(obs, want, manager); known {
			return comparison{Result: res}
		}
	}
	res, err := c.in.ownership().Compare(obs, want, manager)
	if err != nil {
		// Applying is the safe side: an apply that changes nothing is a
		// no-op on the server.
		c.plan.warn("can't compare %s with what the controller applied; applying it: %v", describe(d.obj), err)
		res.Changed = true
	}
	if !res.Changed || !askServer || c.in.DryRun == nil {
		return comparison{Result: res}
	}
	stored, err := c.in.DryRun.DryRunApply(ctx, d.gvr, want)
	switch {
	case apierrors.IsInvalid(err):
		// The server refuses the apply (an immutable field the hook
		// changed): it would change something, and the update strategy
		// says what to do about it.
		return comparison{Result: res}
	case err != nil:
		c.plan.warn("can't ask the target cluster whether applying %s changes it; going by the local comparison, which does not see defaulting and admission: %v", describe(d.obj), err)
		return comparison{Result: res}
	case stored.GetUID() != obs.GetUID() || stored.GetResourceVersion() != obs.GetResourceVersion():
		// The dry run answered for a newer object than the one read:
		// comparing the two would count someone else's change as ours.
		// Someone else's change syncs the parent; the loop's own write
		// may not, so the parent is synced again once its echo is in.
		if c.in.Definition.IgnoreOwnChildWrites {
			c.plan.Recheck = movedOnRecheck
		}
		return comparison{Reason: reasonMovedOn}
	}
	server, err := c.in.ownership().CompareDryRun(obs, want, stored, manager)
	if err != nil {
		c.plan.warn("can't compare %s with the target cluster's dry run of its apply; going by the local comparison: %v", describe(d.obj), err)
		return comparison{Result: res}
	}
	return comparison{Result: server}
}
