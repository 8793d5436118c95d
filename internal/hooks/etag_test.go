package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// etagHook is a hook server that answers what answer says and records the
// If-None-Match header of every request ("" when absent).
type etagHook struct {
	answer func(w http.ResponseWriter, r *http.Request, ifNoneMatch string)

	mu          sync.Mutex
	ifNoneMatch []string
}

func newETagHook(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, ifNoneMatch string)) (*etagHook, *httptest.Server) {
	t.Helper()
	h := &etagHook{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inm := r.Header.Get("If-None-Match")
		h.mu.Lock()
		h.ifNoneMatch = append(h.ifNoneMatch, inm)
		h.mu.Unlock()
		h.answer(w, r, inm)
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *etagHook) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ifNoneMatch...)
}

// answer200 answers body with an ETag header unless etag is "".
func answer200(w http.ResponseWriter, etag, body string) {
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}

// revalidating answers body with etag, and code (304 or 412) with no body
// when offered that ETag.
func revalidating(code int, etag, body string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, _ *http.Request, inm string) {
		if inm == etag {
			w.WriteHeader(code)
			return
		}
		answer200(w, etag, body)
	}
}

func etagWebhook(u string, cfg *v1alpha1.WebhookEtagConfig) *v1alpha1.Webhook {
	wh := urlHook(u)
	wh.Etag = cfg
	return wh
}

func etagOn() *v1alpha1.WebhookEtagConfig {
	return &v1alpha1.WebhookEtagConfig{Enabled: ptr(true)}
}

func parentRequest(kind, namespace, name string) *hookapi.SyncHookRequest {
	parent := &unstructured.Unstructured{}
	parent.SetAPIVersion("example.com/v1")
	parent.SetKind(kind)
	parent.SetNamespace(namespace)
	parent.SetName(name)
	return &hookapi.SyncHookRequest{Parent: parent, Children: hookapi.RelativeObjectMap{}}
}

const etagBody = `{"status":{"ready":true,"n":3},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"k":"v"}}],"resyncAfterSeconds":30}`

func TestETagNotModifiedIsAnsweredFromCache(t *testing.T) {
	for _, code := range []int{http.StatusNotModified, http.StatusPreconditionFailed} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			hook, srv := newETagHook(t, revalidating(code, `"v1"`, etagBody))
			w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, etagOn())})

			first, err := w.Sync(context.Background(), syncRequest())
			if err != nil {
				t.Fatal(err)
			}
			// What the caller does with an answer must not change the
			// next one served from the cache.
			first.Children[0].SetName("changed by the caller")
			first, err = w.Sync(context.Background(), syncRequest())
			if err != nil {
				t.Fatalf("second call: %v", err)
			}
			third, err := w.Sync(context.Background(), syncRequest())
			if err != nil {
				t.Fatalf("third call: %v", err)
			}
			if got, want := hook.seen(), []string{"", `"v1"`, `"v1"`}; !reflect.DeepEqual(got, want) {
				t.Errorf("hook got If-None-Match %q, want %q", got, want)
			}
			if !reflect.DeepEqual(first, third) {
				t.Errorf("answers from the cache differ:\n%+v\n%+v", first, third)
			}
			if first.Children[0].GetName() != "c1" || first.Status["n"] != int64(3) || first.ResyncAfterSeconds != 30 {
				t.Errorf("answer from the cache is %+v, want the hook's first answer", first)
			}
		})
	}
}

func TestETagNewAnswerReplacesEntry(t *testing.T) {
	etag, body := `"v1"`, etagBody
	var mu sync.Mutex
	hook, srv := newETagHook(t, func(w http.ResponseWriter, r *http.Request, inm string) {
		mu.Lock()
		defer mu.Unlock()
		if inm == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		answer200(w, etag, body)
	})
	w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, etagOn())})
	call := func() *hookapi.SyncHookResponse {
		t.Helper()
		resp, err := w.Sync(context.Background(), syncRequest())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	call()
	mu.Lock()
	etag, body = `"v2"`, `{"status":{"ready":false}}`
	mu.Unlock()
	if got := call(); got.Status["ready"] != false {
		t.Errorf("status %v, want the new answer's", got.Status)
	}
	if got := call(); got.Status["ready"] != false || len(got.Children) != 0 {
		t.Errorf("answer %+v, want the new answer from the cache", got)
	}
	if got, want := hook.seen(), []string{"", `"v1"`, `"v2"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("hook got If-None-Match %q, want %q", got, want)
	}
}

func TestETagAnswerWithoutETagKeepsEntry(t *testing.T) {
	n := 0
	hook, srv := newETagHook(t, func(w http.ResponseWriter, r *http.Request, inm string) {
		n++
		switch n {
		case 1:
			answer200(w, `"v1"`, etagBody)
		case 2:
			answer200(w, "", okBody)
		default:
			w.WriteHeader(http.StatusNotModified)
		}
	})
	w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, etagOn())})
	for i := 0; i < 3; i++ {
		if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	// As in Metacontroller, an answer without an ETag neither replaces nor
	// drops the entry.
	if got, want := hook.seen(), []string{"", `"v1"`, `"v1"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("hook got If-None-Match %q, want %q", got, want)
	}
}

func TestETagEntriesArePerParent(t *testing.T) {
	// The hook's ETag names the parent, so a wrong entry would be seen.
	hook, srv := newETagHook(t, func(w http.ResponseWriter, r *http.Request, inm string) {
		var req hookapi.SyncHookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p := req.Parent
		etag := fmt.Sprintf("%q", p.GetKind()+"/"+p.GetNamespace()+"/"+p.GetName())
		if inm == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		answer200(w, etag, fmt.Sprintf(`{"status":{"name":%q}}`, p.GetName()))
	})
	w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, etagOn())})
	for _, req := range []*hookapi.SyncHookRequest{
		parentRequest("Thing", "ns", "a"),
		parentRequest("Thing", "ns", "b"),    // another name
		parentRequest("Thing", "other", "a"), // another namespace
		parentRequest("Other", "ns", "a"),    // another kind
		parentRequest("Thing", "", "a"),      // cluster-scoped
		parentRequest("Thing", "ns", "a"),    // cached
		parentRequest("Thing", "other", "a"), // cached
	} {
		resp, err := w.Sync(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status["name"] != req.Parent.GetName() {
			t.Errorf("parent %s: status %v, want its own answer", req.Parent.GetName(), resp.Status)
		}
	}
	want := []string{"", "", "", "", "", `"Thing/ns/a"`, `"Thing/other/a"`}
	if got := hook.seen(); !reflect.DeepEqual(got, want) {
		t.Errorf("hook got If-None-Match %q, want %q", got, want)
	}
}

func TestETagDisabledSendsNoIfNoneMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *v1alpha1.WebhookEtagConfig
	}{
		{"no etag", nil},
		{"enabled unset", &v1alpha1.WebhookEtagConfig{CacheTimeoutSeconds: ptr[int32](60)}},
		{"enabled false", &v1alpha1.WebhookEtagConfig{Enabled: ptr(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook, srv := newETagHook(t, revalidating(http.StatusNotModified, `"v1"`, etagBody))
			w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, tc.cfg)})
			for i := 0; i < 2; i++ {
				if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			if got, want := hook.seen(), []string{"", ""}; !reflect.DeepEqual(got, want) {
				t.Errorf("hook got If-None-Match %q, want none", got)
			}
		})
	}
}

func TestETagNotModifiedWithoutIfNoneMatchIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *v1alpha1.WebhookEtagConfig
		code int
	}{
		{"304 with etag off", nil, http.StatusNotModified},
		{"304 with nothing cached", etagOn(), http.StatusNotModified},
		{"412 with nothing cached", etagOn(), http.StatusPreconditionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newETagHook(t, func(w http.ResponseWriter, _ *http.Request, _ string) {
				w.WriteHeader(tc.code)
			})
			w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, tc.cfg)})
			_, err := w.Sync(context.Background(), syncRequest())
			var se *StatusError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("want a StatusError %d, got %v", tc.code, err)
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Reason != ReasonStatus {
				t.Errorf("want a CallError with reason %q, got %#v", ReasonStatus, ce)
			}
			if strings.Contains(err.Error(), "redirect") {
				t.Errorf("error %q calls a %d a redirect", err, tc.code)
			}
		})
	}
}

func TestETagCustomizeIsKeyedByParent(t *testing.T) {
	body := `{"relatedResources":[{"apiVersion":"v1","resource":"configmaps"}]}`
	hook, srv := newETagHook(t, revalidating(http.StatusNotModified, `"c1"`, body))
	w := mustNew(t, Config{Hook: "customize", Webhook: etagWebhook(srv.URL, etagOn())})
	req := &hookapi.CustomizeHookRequest{Parent: syncRequest().Parent}
	for i := 0; i < 2; i++ {
		resp, err := w.Customize(context.Background(), req)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if len(resp.RelatedResourceRules) != 1 || resp.RelatedResourceRules[0].Resource != "configmaps" {
			t.Errorf("call %d: answer %+v", i+1, resp)
		}
	}
	if got, want := hook.seen(), []string{"", `"c1"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("hook got If-None-Match %q, want %q", got, want)
	}
}

func TestETagNotModifiedVouchesForTheETagSent(t *testing.T) {
	// A call that offered "v1" gets its 304 only after a concurrent call
	// for the same parent has cached "v2": the 304 vouches for "v1", so
	// that is the answer.
	offered := make(chan struct{})
	release := make(chan struct{})
	_, srv := newETagHook(t, func(w http.ResponseWriter, _ *http.Request, inm string) {
		if inm == "" {
			answer200(w, `"v1"`, `{"status":{"v":1}}`)
			return
		}
		close(offered)
		<-release
		w.WriteHeader(http.StatusNotModified)
	})
	w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, etagOn())})
	if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
		t.Fatal(err)
	}

	type result struct {
		resp *hookapi.SyncHookResponse
		err  error
	}
	done := make(chan result)
	go func() {
		resp, err := w.Sync(context.Background(), syncRequest())
		done <- result{resp, err}
	}()
	<-offered
	w.etags.set(etagKeyMust(t, syncRequest()), `"v2"`, []byte(`{"status":{"v":2}}`))
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.Status["v"] != int64(1) {
		t.Errorf("status %v, want the answer cached under the ETag that was sent", r.resp.Status)
	}
}

func etagKeyMust(t *testing.T, req any) etagKey {
	t.Helper()
	k, ok := etagKeyOf(req)
	if !ok {
		t.Fatal("request has no cache key")
	}
	return k
}

func TestETagCacheExpiryAndCleanup(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	key := etagKey{kind: "Thing", namespace: "ns", name: "a"}

	t.Run("entries expire after cacheTimeoutSeconds", func(t *testing.T) {
		c := newETagCache(&v1alpha1.WebhookEtagConfig{Enabled: ptr(true), CacheTimeoutSeconds: ptr[int32](10)}, clock)
		c.set(key, `"a"`, []byte(`{}`))
		now = now.Add(9 * time.Second)
		if _, ok := c.get(key); !ok {
			t.Error("entry gone before its timeout")
		}
		now = now.Add(time.Second)
		if _, ok := c.get(key); ok {
			t.Error("entry still served after its timeout")
		}
	})

	t.Run("without a timeout entries never expire", func(t *testing.T) {
		c := newETagCache(&v1alpha1.WebhookEtagConfig{Enabled: ptr(true), CacheCleanupSeconds: ptr[int32](1)}, clock)
		c.set(key, `"a"`, []byte(`{}`))
		now = now.Add(365 * 24 * time.Hour)
		if _, ok := c.get(key); !ok {
			t.Error("entry expired without a timeout")
		}
	})

	t.Run("expired entries are dropped every cacheCleanupSeconds", func(t *testing.T) {
		c := newETagCache(&v1alpha1.WebhookEtagConfig{Enabled: ptr(true), CacheTimeoutSeconds: ptr[int32](10), CacheCleanupSeconds: ptr[int32](60)}, clock)
		other := etagKey{kind: "Thing", namespace: "ns", name: "b"}
		c.set(key, `"a"`, []byte(`{}`))
		now = now.Add(55 * time.Second)
		c.set(other, `"b"`, []byte(`{}`))
		if n := c.len(); n != 2 {
			t.Fatalf("%d entries before the cleanup, want 2 (one expired, kept until the cleanup)", n)
		}
		now = now.Add(5 * time.Second)
		if _, ok := c.get(other); !ok {
			t.Error("live entry dropped by the cleanup")
		}
		if n := c.len(); n != 1 {
			t.Errorf("%d entries after the cleanup, want 1", n)
		}
	})

	t.Run("without cacheCleanupSeconds expired entries are kept but not served", func(t *testing.T) {
		c := newETagCache(&v1alpha1.WebhookEtagConfig{Enabled: ptr(true), CacheTimeoutSeconds: ptr[int32](10)}, clock)
		c.set(key, `"a"`, []byte(`{}`))
		now = now.Add(time.Hour)
		if _, ok := c.get(key); ok {
			t.Error("expired entry served")
		}
		if n := c.len(); n != 1 {
			t.Errorf("%d entries, want 1", n)
		}
	})
}

func TestETagExpiredEntryIsNotOffered(t *testing.T) {
	hook, srv := newETagHook(t, revalidating(http.StatusNotModified, `"v1"`, etagBody))
	w := mustNew(t, Config{Webhook: etagWebhook(srv.URL, &v1alpha1.WebhookEtagConfig{Enabled: ptr(true), CacheTimeoutSeconds: ptr[int32](60)})})
	now := time.Now()
	w.etags.now = func() time.Time { return now }
	for _, advance := range []time.Duration{0, 59 * time.Second, 61 * time.Second} {
		now = now.Add(advance)
		if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatal(err)
		}
	}
	// The 304 did not renew the entry, as in Metacontroller: it expired 60s
	// after the first answer.
	if got, want := hook.seen(), []string{"", `"v1"`, ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("hook got If-None-Match %q, want %q", got, want)
	}
}
