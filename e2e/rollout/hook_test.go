package rollout

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// revisionHook serves one sync hook per revision of the controller, at
// /<revision>/sync: each answers a ConfigMap child whose data names its
// revision, and a Ready status. It records which revisions were called
// about which parent, and the one of broken, while broken is set, fails
// (500) for parents labelled bad=true.
type revisionHook struct {
	url    string
	broken atomic.Value // string: the revision that fails bad parents
	mu     sync.Mutex
	// calls are the calls about each parent (namespace/name), by revision;
	// first when the first of them came.
	calls map[string]map[string]int
	first map[string]map[string]time.Time
	// spans are the calls about each parent in the order they came: which
	// revision, and when each began and ended.
	spans map[string][]span
}

type span struct {
	revision   string
	start, end time.Time
}

func startRevisionHook(t *testing.T) *revisionHook {
	t.Helper()
	h := &revisionHook{calls: map[string]map[string]int{}, first: map[string]map[string]time.Time{}, spans: map[string][]span{}}
	h.broken.Store("")
	h.url = serveHTTP(t, h)
	return h
}

// syncRequest is what the hook reads of a CompositeController's request
// (parent) or a DecoratorController's (object).
type syncRequest struct {
	Object *parentMeta `json:"object"`
	Parent *parentMeta `json:"parent"`
}

type parentMeta struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

func (h *revisionHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var revision string
	if _, err := fmt.Sscanf(r.URL.Path, "/%s", &revision); err != nil || len(revision) < 6 || revision[len(revision)-5:] != "/sync" {
		http.NotFound(w, r)
		return
	}
	revision = revision[:len(revision)-5]
	var req syncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind, parent := "children", req.Parent
	if req.Object != nil {
		kind, parent = "attachments", req.Object
	}
	if parent == nil {
		http.Error(w, "no parent and no object", http.StatusBadRequest)
		return
	}
	p := parent.Metadata
	key := p.Namespace + "/" + p.Name
	h.mu.Lock()
	if h.calls[key] == nil {
		h.calls[key], h.first[key] = map[string]int{}, map[string]time.Time{}
	}
	if h.calls[key][revision] == 0 {
		h.first[key][revision] = time.Now()
	}
	h.calls[key][revision]++
	i := len(h.spans[key])
	h.spans[key] = append(h.spans[key], span{revision: revision, start: time.Now()})
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.spans[key][i].end = time.Now()
		h.mu.Unlock()
	}()
	if h.broken.Load() == revision && p.Labels["bad"] == "true" {
		http.Error(w, "revision "+revision+" fails bad parents", http.StatusInternalServerError)
		return
	}
	resp := map[string]any{
		"status": map[string]any{"revision": revision, "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Synced"}}},
		kind: []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": p.Name},
			"data":     map[string]any{"revision": revision},
		}},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// firstCall is when the hook of revision was first called about key.
func (h *revisionHook) firstCall(key, revision string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first[key][revision]
}

// callsOf are the calls about parent key, by revision, now.
func (h *revisionHook) callsOf(key string) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for r, n := range h.calls[key] {
		out[r] = n
	}
	return out
}

// twoRevisions names, for each parent of keys, what shows it synced by two
// revisions: a call of from after one of to began (the rollout moves
// parents from one to the other, never back), or two calls at once.
func (h *revisionHook) twoRevisions(keys []string, from, to string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, key := range keys {
		var moved time.Time
		spans := h.spans[key]
		for i, sp := range spans {
			if sp.revision == to && moved.IsZero() {
				moved = sp.start
			}
			if sp.revision == from && !moved.IsZero() {
				out = append(out, fmt.Sprintf("%s: a call of %s at %s after its first of %s at %s", key, from, sp.start.Format(time.StampMilli), to, moved.Format(time.StampMilli)))
			}
			if i > 0 && (spans[i-1].end.IsZero() || sp.start.Before(spans[i-1].end)) {
				out = append(out, fmt.Sprintf("%s: a call of %s at %s while one of %s was in flight", key, sp.revision, sp.start.Format(time.StampMilli), spans[i-1].revision))
			}
		}
	}
	return out
}
