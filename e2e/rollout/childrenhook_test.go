package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// childrenHook serves one sync hook per revision at /<revision>/sync. v1
// answers three ConfigMaps per parent and a status counting them; any
// other revision answers successfully, with no children and a status
// without the count: a change that lost its children's template, which
// only a health condition on the parents can tell from a good one.
type childrenHook struct {
	url string
	mu  sync.Mutex
	// calls are when each call came, by revision and parent
	// (namespace/name).
	calls map[string]map[string][]time.Time
}

// childrenPerParent is how many ConfigMaps v1 gives each parent.
const childrenPerParent = 3

func startChildrenHook(t *testing.T) *childrenHook {
	t.Helper()
	h := &childrenHook{calls: map[string]map[string][]time.Time{}}
	h.url = serveHTTP(t, h)
	return h
}

func (h *childrenHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	revision, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/sync")
	if !ok || revision == "" || strings.Contains(revision, "/") {
		http.NotFound(w, r)
		return
	}
	var req syncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Parent == nil {
		http.Error(w, fmt.Sprintf("no parent in the request: %v", err), http.StatusBadRequest)
		return
	}
	p := req.Parent.Metadata
	h.mu.Lock()
	if h.calls[revision] == nil {
		h.calls[revision] = map[string][]time.Time{}
	}
	key := p.Namespace + "/" + p.Name
	h.calls[revision][key] = append(h.calls[revision][key], time.Now())
	h.mu.Unlock()
	children := []any{}
	status := map[string]any{"revision": revision}
	if revision == "v1" {
		for i := 0; i < childrenPerParent; i++ {
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", p.Name, i)},
				"data":     map[string]any{"parent": p.Name, "revision": revision},
			})
		}
		status["count"] = len(children)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "children": children})
}

// calledAbout are the parents (namespace/name) revision's hook was called
// about, sorted.
func (h *childrenHook) calledAbout(revision string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for key := range h.calls[revision] {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

// calledSince tells whether any revision's hook was called about key at or
// after since.
func (h *childrenHook) calledSince(key string, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, byParent := range h.calls {
		for _, at := range byParent[key] {
			if !at.Before(since) {
				return true
			}
		}
	}
	return false
}

// childCounts are how many ConfigMaps of childrenHook each parent of ns
// has, by parent name.
func childCounts(t *testing.T, ns string) map[string]int {
	t.Helper()
	list, err := suite.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range list.Items {
		if p, ok := c.Data["parent"]; ok {
			out[p]++
		}
	}
	return out
}
