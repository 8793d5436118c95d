package fieldowner

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/internal/unstructuredjson"
)

// Comparer is what Unchanged remembers answers of: *Schemas.
type Comparer interface {
	Compare(observed, desired *unstructured.Unstructured, manager string) (Result, error)
	// CompareDryRun compares observed with stored, what the API server
	// answered for a dry run of applying desired to it (CompareDryRun).
	CompareDryRun(observed, desired, stored *unstructured.Unstructured, manager string) (Result, error)
	TakeoverPatch(observed *unstructured.Unstructured, manager string) ([]byte, bool, error)
}

// Unchanged answers Compare without structured-merge-diff for a child that
// is, to the resourceVersion, the one a manager last applied or found
// converged with the same desired object: applying the same object again
// to the same stored object changes nothing. Every sync of a converged
// parent compares each of its children; the merge costs about 0.2 ms of CPU
// a child, so that a resync of 2,000 parents of 10 children spent seconds
// of CPU only to find that nothing changed. It is the loop's; a preview
// may share it (the fleet preview does), as a converged child has no
// lines to show and a dry run's changed answer keeps its own.
//
// It also remembers what a dry run answered, changed or not
// (DryRunAnswer): a dry run is a request to the API server, which runs the
// cluster's admission webhooks, and asking it again about the same stored
// object and the same desired object tells nothing new, except when
// admission or defaulting changed in between, which serverAnswerTTL bounds.
type Unchanged struct {
	Comparer
	size int
	now  func() time.Time

	mu sync.Mutex
	// byUID holds one entry per child: the resourceVersion it had, a
	// digest of the manager and desired object, and the answer. Each is
	// about 160 bytes, and a changed answer its lines; the strings are the
	// objects' own.
	byUID map[types.UID]unchangedEntry
}

type unchangedEntry struct {
	rv  string
	sum digestSum
	// expires is when an answer of the API server's (a dry run's, an
	// apply's) is no longer trusted; zero for a local merge's answer,
	// which the key decides alone.
	expires time.Time
	// changed is a dry run's answer that applying would change the child;
	// nil when nothing would change.
	changed *Result
}

// serverAnswerTTL bounds how long an answer of the API server is trusted.
// The key (child, resourceVersion, manager and desired object) decides a
// local merge, but not what the server answers: that depends on the
// admission chain (mutating webhooks, policies) and defaulting as they
// were when it answered. A mutating policy removed, the change it undid
// must still be applied, within a bounded time and not only once the child
// changes for another reason. An hour is twice the server's default
// informer resync: a child that only the server finds converged costs one
// dry run every other resync at most, and a policy's removal shows within
// an hour and a resync.
const serverAnswerTTL = time.Hour

// digestSum is a SHA-256 of the manager and the desired object, cut to
// 128 bits: enough that two different desired objects never meet.
type digestSum [16]byte

// NewUnchanged remembers up to size children; past that it starts over.
func NewUnchanged(c Comparer, size int) *Unchanged {
	return &Unchanged{Comparer: c, size: size, now: time.Now, byUID: map[types.UID]unchangedEntry{}}
}

// Compare is c's Compare, or an unchanged Result when the observed child
// is the one the manager applied, or found converged, with desired.
func (u *Unchanged) Compare(observed, desired *unstructured.Unstructured, manager string) (Result, error) {
	sum, ok := digest(manager, desired)
	if e, hit := u.lookup(observed, sum, ok); hit && e.changed == nil {
		return Result{}, nil
	}
	res, err := u.Comparer.Compare(observed, desired, manager)
	if err == nil && !res.Changed && ok {
		u.remember(observed.GetUID(), observed.GetResourceVersion(), unchangedEntry{sum: sum})
	}
	return res, err
}

// CompareDryRun is c's CompareDryRun, remembering its answer, changed or
// not, for a while (serverAnswerTTL): the dry run that told it costs a
// request, and the next sync of the same stored object with the same
// desired object needs neither it nor a merge.
func (u *Unchanged) CompareDryRun(observed, desired, stored *unstructured.Unstructured, manager string) (Result, error) {
	res, err := u.Comparer.CompareDryRun(observed, desired, stored, manager)
	if err != nil {
		return res, err
	}
	if sum, ok := digest(manager, desired); ok {
		e := unchangedEntry{sum: sum, expires: u.now().Add(serverAnswerTTL)}
		if res.Changed {
			// Clipped, so that a caller appending to the lines copies
			// them rather than write into what the next sync reads.
			e.changed = &Result{Changed: true, Lines: slices.Clip(res.Lines), Ownership: slices.Clip(res.Ownership), Fallback: res.Fallback}
		}
		u.remember(observed.GetUID(), observed.GetResourceVersion(), e)
	}
	return res, err
}

// DryRunAnswer is what the API server answered for the observed child, at
// its resourceVersion, with desired, while that answer is trusted: a dry
// run's (CompareDryRun), or nothing changed when the child is what the
// server stored for the apply of desired (Applied). The question need not
// be asked of the API server again.
func (u *Unchanged) DryRunAnswer(observed, desired *unstructured.Unstructured, manager string) (Result, bool) {
	sum, ok := digest(manager, desired)
	e, hit := u.lookup(observed, sum, ok)
	switch {
	case !hit || e.expires.IsZero():
		// Not asked, or known from a local merge, which is no answer
		// of the server's.
		return Result{}, false
	case e.changed != nil:
		return *e.changed, true
	}
	return Result{}, true
}

// lookup is the entry remembered for observed at its resourceVersion with
// the desired object of digest sum (ok: there is one), while trusted.
func (u *Unchanged) lookup(observed *unstructured.Unstructured, sum digestSum, ok bool) (unchangedEntry, bool) {
	uid, rv := observed.GetUID(), observed.GetResourceVersion()
	if !ok || uid == "" || rv == "" {
		return unchangedEntry{}, false
	}
	u.mu.Lock()
	e, hit := u.byUID[uid]
	u.mu.Unlock()
	if !hit || e.rv != rv || e.sum != sum || !e.expires.IsZero() && !u.now().Before(e.expires) {
		return unchangedEntry{}, false
	}
	return e, true
}

// Applied remembers that manager applied body (the desired object's JSON,
// as json.Marshal writes it) and the API server stored it at uid and rv:
// the next Compare of that stored object with the same desired object
// needs no merge. What the server stored went through admission, as a dry
// run's answer does, and is trusted as long (serverAnswerTTL).
func (u *Unchanged) Applied(body []byte, uid types.UID, rv, manager string) {
	if len(body) == 0 {
		return
	}
	u.remember(uid, rv, unchangedEntry{sum: digestJSON(manager, body), expires: u.now().Add(serverAnswerTTL)})
}

func (u *Unchanged) remember(uid types.UID, rv string, e unchangedEntry) {
	if uid == "" || rv == "" {
		return
	}
	e.rv = rv
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.byUID[uid]; !ok && len(u.byUID) >= u.size {
		// Deleted children leave their entries behind; starting over
		// now and then bounds them at the cost of one merge a child.
		u.byUID = map[types.UID]unchangedEntry{}
	}
	u.byUID[uid] = e
}

// digest hashes the manager and the object's JSON (keys sorted, as
// json.Marshal writes it), written into a reused buffer: json.Marshal's
// reflection and its copy of the bytes, only to hash them, were most of
// what comparing a converged child allocated.
func digest(manager string, obj *unstructured.Unstructured) (digestSum, bool) {
	buf := digestBuffers.Get().(*[]byte)
	defer digestBuffers.Put(buf)
	data, err := unstructuredjson.Append((*buf)[:0], obj.Object)
	if err != nil {
		return digestSum{}, false
	}
	*buf = data
	return digestJSON(manager, data), true
}

var digestBuffers = sync.Pool{New: func() any { return new([]byte) }}

func digestJSON(manager string, data []byte) digestSum {
	h := sha256.New()
	h.Write([]byte(manager))
	h.Write([]byte{0})
	h.Write(data)
	var full [sha256.Size]byte
	var out digestSum
	copy(out[:], h.Sum(full[:0]))
	return out
}
