package rollout

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
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
	// calls are the calls about each parent (namespace/name), by revision.
	calls map[string]map[string]int
}

func startRevisionHook(t *testing.T) *revisionHook {
	t.Helper()
	h := &revisionHook{calls: map[string]map[string]int{}}
	h.broken.Store("")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	h.url = "http://" + l.Addr().String()
	return h
}

type syncRequest struct {
	Parent struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	} `json:"parent"`
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
	p := req.Parent.Metadata
	key := p.Namespace + "/" + p.Name
	h.mu.Lock()
	if h.calls[key] == nil {
		h.calls[key] = map[string]int{}
	}
	h.calls[key][revision]++
	h.mu.Unlock()
	if h.broken.Load() == revision && p.Labels["bad"] == "true" {
		http.Error(w, "revision "+revision+" fails bad parents", http.StatusInternalServerError)
		return
	}
	resp := map[string]any{
		"status": map[string]any{"revision": revision, "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Synced"}}},
		"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": p.Name},
			"data":     map[string]any{"revision": revision},
		}},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
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
