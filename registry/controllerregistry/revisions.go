package controllerregistry

import (
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// Revisions keeps a controller's revisions on a write of its spec, for a
// kind whose specs are S and whose history entries are E: the server, and
// never the client, numbers the spec and records the one it replaced,
// with that spec's author, in status.history. They are recorded here, in
// the same write as the spec, so that no spec ever runs that its history
// does not name, and no status writer can forge one (the status strategy
// keeps them as stored).
type Revisions[S, E any] struct {
	// Strip is a spec without what does not make a revision (its rollout
	// and history limit).
	Strip func(S) S
	// Entry makes a history entry of a spec replaced.
	Entry func(record metacontroller.RevisionRecord, spec S) E
	// Record and Spec read an entry.
	Record func(E) metacontroller.RevisionRecord
	Spec   func(E) S
	// Rollout is a spec's rollout, nil for none.
	Rollout func(S) *metacontroller.ControllerRollout
}

// SameRevision tells whether two specs are one revision: they differ at
// most in what Strip drops.
func (r Revisions[S, E]) SameRevision(a, b S) bool {
	return apiequality.Semantic.DeepEqual(r.Strip(a), r.Strip(b))
}

// Update returns the revision number and history of a controller whose
// spec oldSpec (revision oldRevision, by oldAuthor, with oldHistory and the
// rollout status rollout) is replaced by newSpec, which keeps at most limit
// earlier revisions. A spec equal to an earlier one leaves the history (it
// becomes the new revision, as kubectl rollout undo makes an old ReplicaSet
// the newest revision). Trimming keeps, whatever the limit, the revisions
// a rollout rolls from (keptRevisions).
func (r Revisions[S, E]) Update(oldSpec, newSpec S, oldRevision int64, oldAuthor *metacontroller.ControllerAuthor, oldHistory []E, rollout *metacontroller.RolloutStatus, limit int32) (int64, []E) {
	if r.SameRevision(oldSpec, newSpec) {
		return max(oldRevision, 1), oldHistory
	}
	now := metav1.Now()
	replaced := r.Entry(metacontroller.RevisionRecord{Revision: max(oldRevision, 1), Author: oldAuthor, ReplacedTime: &now}, r.Strip(oldSpec))
	history := []E{replaced}
	newest := max(oldRevision, 1)
	for _, e := range oldHistory {
		newest = max(newest, r.Record(e).Revision)
		if !r.SameRevision(r.Spec(e), newSpec) {
			history = append(history, e)
		}
	}
	keep := keptRevisions(rollout, max(oldRevision, 1), r.Rollout(newSpec) != nil)
	return newest + 1, trim(history, r.Record, keep, limit)
}

// trim keeps the newest limit entries of history, and those of keep.
func trim[E any](history []E, record func(E) metacontroller.RevisionRecord, keep []int64, limit int32) []E {
	if int(limit) >= len(history) {
		return history
	}
	kept := history[:0:0]
	for i, e := range history {
		if i < int(limit) || slices.Contains(keep, record(e).Revision) {
			kept = append(kept, e)
		}
	}
	return kept
}

// HistoryLimit is a spec's revisionHistoryLimit, or the default.
func HistoryLimit(limit *int32) int32 {
	if limit == nil {
		return 10
	}
	return max(*limit, 0)
}

// keptRevisions are the revisions a rollout rolls its parents from, which
// no revisionHistoryLimit may trim: without the revision its parents run,
// a rollout has nothing to roll from and lands the new spec on every
// parent at once (R3). They are the current revision of a rollout under
// way, whatever the new spec; and when the new spec (a new revision) has
// a rollout, the revision it replaces and the one the last rollout landed,
// which every parent runs until the loop reads this write: two writes in a
// row must not trim it before the loop has begun rolling from it.
func keptRevisions(status *metacontroller.RolloutStatus, replaced int64, rollout bool) []int64 {
	var keep []int64
	if status != nil && (rollout || status.Phase != metacontroller.RolloutComplete) {
		keep = append(keep, status.CurrentRevision)
	}
	if rollout {
		keep = append(keep, replaced)
	}
	return keep
}
