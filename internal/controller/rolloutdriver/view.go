package rolloutdriver

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// maxEvaluations bounds the health condition's evaluations in one tick:
// each is bounded in cost (rollout.Health), and a parent unchanged since
// its last evaluation is not evaluated again, so a tick among thousands of
// moved parents evaluates those that changed, a bounded number at a time;
// the others wait for the next tick as not yet healthy.
const maxEvaluations = 1000

// healthMemo is a parent's health at one resourceVersion, by the condition
// expr: an edit of the condition evaluates every parent again (the memo is
// the tick's alone; Follow, on the manager's goroutine, only swaps the
// condition).
type healthMemo struct {
	expr            string
	resourceVersion string
	healthy         bool
	err             error
}

// look is the gate's view of the parents this replica syncs: those the
// step moved, those of them healthy, and the others' names. Parents paused
// by their annotation are not synced by the loop: they are counted apart,
// neither moved nor failing (R6).
func (r *Driver) look(ctx context.Context) rollout.Tally {
	r.mu.Lock()
	t := rollout.Tally{SyncFailures: r.failuresNow()}
	results, health := maps.Clone(r.results), r.health
	r.mu.Unlock()
	budget := maxEvaluations
	present := map[types.UID]bool{}
	for _, p := range r.cfg.Update.Parents() {
		present[p.GetUID()] = true
		if !r.updated(p) {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if r.shards != nil && !r.shards.group.Owns(key) {
			continue
		}
		if pausedParent(p) {
			t.Paused++
			continue
		}
		t.Updated++
		ok, err := r.healthy(ctx, p, results, health, &budget)
		switch {
		case ok:
			t.Healthy++
			continue
		case err != nil:
			if t.HealthErrors++; t.HealthError == "" {
				t.HealthError = err.Error()
			}
		}
		t.Failing = append(t.Failing, key)
	}
	slices.Sort(t.Failing)
	r.forgetGone(present)
	return t
}

// healthy tells whether a parent moved passes the gate: the update
// revision synced its current generation without an error, and it passes
// the health condition (by default, a Ready condition when it has one).
// An error of the condition is returned, for the status to say (R7).
func (r *Driver) healthy(ctx context.Context, p *unstructured.Unstructured, results map[types.UID]syncResult, health *rollout.Health, budget *int) (bool, error) {
	res, ok := results[p.GetUID()]
	if !ok || res.err != nil || res.generation != p.GetGeneration() || olderThan(p.GetResourceVersion(), res.written) {
		// Not synced by the update revision at this generation, or the
		// cache has not yet seen the status it wrote: its Ready may be
		// the previous revision's (R8).
		return false, nil
	}
	if r.shards != nil {
		// Synced under an earlier hold of its shard: another replica
		// may have synced it since, while this one's cache lags (the
		// --shards model, seed 1796689461117724999).
		if key, _ := cache.MetaNamespaceKeyFunc(p); res.epoch != r.shards.group.Epoch(key) {
			return false, nil
		}
	}
	if health == nil {
		ready, _ := rollout.DefaultHealthy(p)
		return ready, nil
	}
	if m, ok := r.healthMemo[p.GetUID()]; ok && m.expr == health.Expr() && m.resourceVersion == p.GetResourceVersion() {
		return m.healthy, m.err
	}
	if *budget <= 0 {
		return false, nil
	}
	*budget--
	healthy, err := health.Healthy(ctx, p)
	r.healthMemo[p.GetUID()] = healthMemo{expr: health.Expr(), resourceVersion: p.GetResourceVersion(), healthy: healthy, err: err}
	return healthy, err
}

// forgetGone drops what the driver remembers of parents that are gone:
// their results and health (R20).
func (r *Driver) forgetGone(present map[types.UID]bool) {
	for uid := range r.healthMemo {
		if !present[uid] {
			delete(r.healthMemo, uid)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.results {
		if !present[uid] {
			delete(r.results, uid)
		}
	}
}

// pausedParent tells whether the loop leaves the parent alone
// (v1alpha1.ParentPausedAnnotation).
func pausedParent(p *unstructured.Unstructured) bool {
	v, _, _ := unstructured.NestedString(p.Object, "metadata", "annotations", v1alpha1.ParentPausedAnnotation)
	return v == "true"
}

// olderThan tells whether the cached resourceVersion rv is older than
// written. Resource versions are etcd revisions here (kube-apiserver and
// this server's own storage); one that is not a number is taken as new
// enough, as the gate did before it compared them.
func olderThan(rv, written string) bool {
	if written == "" {
		return false
	}
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(written, 10, 64)
	return errA == nil && errB == nil && a < b
}
