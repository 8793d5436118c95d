package hooks

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

const (
	headerIfNoneMatch = "If-None-Match"
	headerETag        = "ETag"
)

// etagKey names the object a request is about, as Metacontroller keys its
// ETag cache: the parent's kind, namespace and name. The UID is not part of
// it, so a parent that is deleted and created again under the same name
// offers the hook the old ETag, as Metacontroller does; the hook decides.
type etagKey struct {
	kind, namespace, name string
}

func (k etagKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// etagEntry is the last answer of the hook for one parent that came with an
// ETag. body is kept undecoded: every call decodes it afresh, so callers that
// change what they got cannot change what the next call gets.
type etagEntry struct {
	etag    string
	body    []byte
	expires time.Time // zero: never
}

// etagCache is webhook.etag (RFC 7232) as Metacontroller implements it: the
// last answer per parent with its ETag, offered back as If-None-Match so that
// the hook can answer 304 (or 412) instead of recomputing and resending it.
//
// Like Metacontroller's cache (zcache), an entry never expires when
// cacheTimeoutSeconds is unset or 0, and expired entries are dropped every
// cacheCleanupSeconds. Expired entries are never used, whether dropped yet
// or not. The cleanup runs during calls rather than on a timer so that a
// Webhook owns no goroutine that would outlive it when its controller
// changes.
type etagCache struct {
	ttl          time.Duration // <= 0: entries never expire
	cleanupEvery time.Duration // <= 0: expired entries are only replaced
	now          func() time.Time

	mu          sync.Mutex
	entries     map[etagKey]etagEntry
	nextCleanup time.Time
}

// newETagCache returns nil when ETags are not enabled.
func newETagCache(cfg *v1alpha1.WebhookEtagConfig, now func() time.Time) *etagCache {
	if cfg == nil || cfg.Enabled == nil || !*cfg.Enabled {
		return nil
	}
	c := &etagCache{now: now, entries: map[etagKey]etagEntry{}}
	if cfg.CacheTimeoutSeconds != nil {
		c.ttl = time.Duration(*cfg.CacheTimeoutSeconds) * time.Second
		// Metacontroller ignores cacheCleanupSeconds without a timeout:
		// nothing expires, so there is nothing to clean up.
		if cfg.CacheCleanupSeconds != nil {
			c.cleanupEvery = time.Duration(*cfg.CacheCleanupSeconds) * time.Second
		}
	}
	return c
}

// get returns the live entry for key.
func (c *etagCache) get(key etagKey) (etagEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.cleanupLocked(now)
	e, ok := c.entries[key]
	if !ok || (!e.expires.IsZero() && !now.Before(e.expires)) {
		return etagEntry{}, false
	}
	return e, true
}

// set stores the answer body for key under etag, replacing any entry.
func (c *etagCache) set(key etagKey, etag string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.cleanupLocked(now)
	e := etagEntry{etag: etag, body: body}
	if c.ttl > 0 {
		e.expires = now.Add(c.ttl)
	}
	c.entries[key] = e
}

// len is the number of entries held, expired or not.
func (c *etagCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *etagCache) cleanupLocked(now time.Time) {
	if c.ttl <= 0 || c.cleanupEvery <= 0 {
		return
	}
	if c.nextCleanup.IsZero() {
		c.nextCleanup = now.Add(c.cleanupEvery)
		return
	}
	if now.Before(c.nextCleanup) {
		return
	}
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	c.nextCleanup = now.Add(c.cleanupEvery)
}

// etagKeyOf returns the cache key of a hook request: that of its parent, the
// root object in Metacontroller's terms. Requests without a parent are not
// cached.
func etagKeyOf(request any) (etagKey, bool) {
	var parent *unstructured.Unstructured
	switch r := request.(type) {
	case *hookapi.SyncHookRequest:
		parent = r.Parent
	case *hookapi.CustomizeHookRequest:
		parent = r.Parent
	}
	if parent == nil {
		return etagKey{}, false
	}
	return etagKey{kind: parent.GetKind(), namespace: parent.GetNamespace(), name: parent.GetName()}, true
}

// notModified reports whether code means "the answer for the ETag you sent is
// unchanged". Metacontroller takes 412 Precondition Failed to mean the same as
// 304 Not Modified, and so do we.
func notModified(code int) bool {
	return code == http.StatusNotModified || code == http.StatusPreconditionFailed
}
