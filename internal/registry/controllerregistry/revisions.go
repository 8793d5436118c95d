package controllerregistry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
// the newest revision). Trimming keeps, whatever the limit and the size,
// the revisions a rollout rolls from (keptRevisions); dropped are the
// revisions trimmed for size alone (trim), which the write warns of.
func (r Revisions[S, E]) Update(oldSpec, newSpec S, oldRevision int64, oldAuthor *metacontroller.ControllerAuthor, oldHistory []E, rollout *metacontroller.RolloutStatus, limit int32) (revision int64, history []E, dropped []int64) {
	if r.SameRevision(oldSpec, newSpec) {
		return max(oldRevision, 1), oldHistory, nil
	}
	now := metav1.Now()
	replaced := r.Entry(metacontroller.RevisionRecord{Revision: max(oldRevision, 1), Author: oldAuthor, ReplacedTime: &now}, r.Strip(oldSpec))
	history = []E{replaced}
	newest := max(oldRevision, 1)
	for _, e := range oldHistory {
		newest = max(newest, r.Record(e).Revision)
		if !r.SameRevision(r.Spec(e), newSpec) {
			history = append(history, e)
		}
	}
	keep := keptRevisions(rollout, max(oldRevision, 1), r.Rollout(newSpec) != nil)
	history, dropped = trim(history, r.Record, keep, limit)
	return newest + 1, history, dropped
}

// historyBudget bounds the JSON of a controller's status.history. etcd
// refuses a write above its request limit (--max-request-bytes, 1.5 MiB
// by default), and a write of a controller carries its spec twice (kubectl
// apply copies it into the last-applied-configuration annotation), its
// managedFields and the rest of its status beside the history: kept to a
// third of the limit, the history leaves the other two thirds to the rest,
// so that any spec below 512 KiB can still be written, and every informer
// of controllers on every replica holds at most this much history per
// controller.
const historyBudget = 512 << 10

// trim keeps the newest limit entries of history, and those of keep; then
// it drops, oldest first, entries not in keep until the JSON of those left
// is within historyBudget. dropped are the revisions the limit kept and
// the budget dropped.
func trim[E any](history []E, record func(E) metacontroller.RevisionRecord, keep []int64, limit int32) (kept []E, dropped []int64) {
	kept = history[:0:0]
	var sizes []int
	total := 0
	for i, e := range history {
		if i < int(limit) || slices.Contains(keep, record(e).Revision) {
			kept = append(kept, e)
			sizes = append(sizes, jsonSize(e))
			total += sizes[len(sizes)-1]
		}
	}
	if total <= historyBudget {
		return kept, nil
	}
	drop := make([]bool, len(kept))
	for i := len(kept) - 1; i >= 0 && total > historyBudget; i-- {
		if rev := record(kept[i]).Revision; !slices.Contains(keep, rev) {
			drop[i], total = true, total-sizes[i]
			dropped = append(dropped, rev)
		}
	}
	within := kept[:0:0]
	for i, e := range kept {
		if !drop[i] {
			within = append(within, e)
		}
	}
	return within, dropped
}

// jsonSize is the size of e in a list of JSON, with its comma.
func jsonSize(e any) int {
	data, err := json.Marshal(e)
	if err != nil {
		// Not for the API's types, whose fields all encode; an entry
		// that did not would not be stored either.
		return 0
	}
	return len(data) + 1
}

// TrimWarnings warn of the revisions a write dropped from status.history
// for its size alone: kubectl composite rollout undo can no longer go back
// to them.
func TrimWarnings(dropped []int64) []string {
	if len(dropped) == 0 {
		return nil
	}
	revs := make([]string, len(dropped))
	for i, r := range dropped {
		revs[i] = strconv.FormatInt(r, 10)
	}
	which := "revision " + revs[0]
	if len(revs) > 1 {
		which = "revisions " + strings.Join(revs, ", ")
	}
	return []string{fmt.Sprintf("status.history: %s dropped, the oldest first, to keep the history within %d KiB of JSON, a third of etcd's default 1.5 MiB request limit, so that the controller can still be written; kubectl composite rollout undo can no longer go back to them",
		which, historyBudget>>10)}
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
