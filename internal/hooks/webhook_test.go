package hooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func syncRequest() *hookapi.SyncHookRequest {
	parent := &unstructured.Unstructured{}
	parent.SetAPIVersion("example.com/v1")
	parent.SetKind("Thing")
	parent.SetNamespace("ns")
	parent.SetName("t1")
	return &hookapi.SyncHookRequest{Parent: parent, Children: hookapi.RelativeObjectMap{}}
}

func TestSyncSendsJSONAndDecodesAnswer(t *testing.T) {
	var gotMethod, gotType, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotType = r.Method, r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		okHandler(`{"status":{"replicas":3,"ratio":0.5},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"n":"1"},"spec":{"n":7}}],"resyncAfterSeconds":2.5,"finalized":true}`)(w, r)
	}))
	defer srv.Close()

	w := mustNew(t, Config{Webhook: urlHook(srv.URL + "/sync")})
	resp, err := w.Sync(context.Background(), syncRequest())
	if err != nil {
		t.Fatal(err)
	}
	if gotMethod != http.MethodPost || gotType != "application/json" {
		t.Errorf("hook got %s with Content-Type %q, want POST application/json", gotMethod, gotType)
	}
	if want := `{"controller":null,"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1","namespace":"ns"}},"children":{},"related":{},"finalizing":false}`; gotBody != want {
		t.Errorf("hook got body\n%s\nwant\n%s", gotBody, want)
	}
	if _, ok := resp.Status["replicas"].(int64); !ok {
		t.Errorf("status.replicas is %T, want int64", resp.Status["replicas"])
	}
	if n, _, _ := unstructured.NestedInt64(resp.Children[0].Object, "spec", "n"); n != 7 {
		t.Errorf("child spec.n = %d, want 7", n)
	}
	if resp.ResyncAfterSeconds != 2.5 || !resp.Finalized {
		t.Errorf("response %+v", resp)
	}
}

func TestCustomizeDecodesRelatedResources(t *testing.T) {
	srv := httptest.NewServer(okHandler(`{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","labelSelector":{"matchLabels":{"a":"b"}},"names":null}]}`))
	defer srv.Close()
	w := mustNew(t, Config{Hook: "customize", Webhook: urlHook(srv.URL)})
	resp, err := w.Customize(context.Background(), &hookapi.CustomizeHookRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.RelatedResourceRules) != 1 || resp.RelatedResourceRules[0].LabelSelector.MatchLabels["a"] != "b" {
		t.Errorf("response %+v", resp)
	}
}

func TestCallFailures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handler    http.HandlerFunc
		mode       v1alpha1.ResponseUnmarshallMode
		maxBytes   int64
		wantReason string
		wantMsg    string
		check      func(t *testing.T, err error)
	}{
		{
			name: "500 is a StatusError with the start of the body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "boom: "+strings.Repeat("x", 5000), http.StatusInternalServerError)
			},
			wantReason: ReasonStatus,
			wantMsg:    "hook answered HTTP 500 Internal Server Error: boom: xxx",
			check: func(t *testing.T, err error) {
				var se *StatusError
				if !errors.As(err, &se) || se.Code != 500 || len(se.Body) > maxErrorBody || !strings.HasPrefix(se.Body, "boom: ") {
					t.Errorf("want StatusError 500 with a body of at most 1 KiB, got %#v", se)
				}
			},
		},
		{
			name: "429 with Retry-After seconds is a TooManyRequestsError",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
			},
			wantReason: ReasonTooManyRequests,
			wantMsg:    "retry after 7s",
			check: func(t *testing.T, err error) {
				var tm *TooManyRequestsError
				if !errors.As(err, &tm) || tm.RetryAfter != 7*time.Second {
					t.Errorf("want TooManyRequestsError{7s}, got %#v", tm)
				}
			},
		},
		{
			name: "429 with a Retry-After date is a TooManyRequestsError",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusTooManyRequests)
			},
			wantReason: ReasonTooManyRequests,
			check: func(t *testing.T, err error) {
				var tm *TooManyRequestsError
				if !errors.As(err, &tm) || tm.RetryAfter < 28*time.Second || tm.RetryAfter > 31*time.Second {
					t.Errorf("want TooManyRequestsError of about 30s, got %#v", tm)
				}
			},
		},
		{
			name: "429 without Retry-After has no advice",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusTooManyRequests)
			},
			wantReason: ReasonTooManyRequests,
			check: func(t *testing.T, err error) {
				var tm *TooManyRequestsError
				if !errors.As(err, &tm) || tm.RetryAfter != 0 {
					t.Errorf("want TooManyRequestsError{0}, got %#v", tm)
				}
			},
		},
		{
			name:       "answer over the size limit is rejected",
			handler:    okHandler(`{"status":{"padding":"` + strings.Repeat("x", 200) + `"}}`),
			maxBytes:   100,
			wantReason: ReasonTooLarge,
			wantMsg:    "response larger than 100 bytes",
		},
		{
			name: "streamed answer over the size limit is rejected",
			handler: func(w http.ResponseWriter, r *http.Request) {
				// Flushing forces chunked encoding: no Content-Length.
				for i := 0; i < 10; i++ {
					_, _ = io.WriteString(w, strings.Repeat(" ", 50))
					w.(http.Flusher).Flush()
				}
			},
			maxBytes:   100,
			wantReason: ReasonTooLarge,
			wantMsg:    "response larger than 100 bytes",
		},
		{
			name:       "invalid JSON is a decode error",
			handler:    okHandler(`{"status":`),
			wantReason: ReasonDecode,
			wantMsg:    "can't decode response",
		},
		{
			// Decoded, the name would be "a\uFFFD": child a deleted, and
			// a child the hook never named created.
			name:       "an answer that is not UTF-8 is rejected",
			handler:    okHandler("{\"children\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\xff\"}}]}"),
			wantReason: ReasonDecode,
			wantMsg:    "not valid UTF-8",
		},
		{
			name:       "an answer with invalid UTF-8 in a string only is rejected in strict mode too",
			handler:    okHandler("{\"status\":{\"color\":\"blue\xc0\x80\"},\"children\":[]}"),
			mode:       v1alpha1.ResponseUnmarshallModeStrict,
			wantReason: ReasonDecode,
			wantMsg:    "not valid UTF-8",
		},
		{
			// Decoded, it would be the empty answer: delete every child.
			name:       "a null answer is rejected",
			handler:    okHandler(" null\n"),
			wantReason: ReasonDecode,
			wantMsg:    "it is null, not a JSON object",
		},
		{
			name:       "status that is a string is rejected",
			handler:    okHandler(`{"status":"ready","children":[]}`),
			wantReason: ReasonDecode,
			wantMsg:    "status must be a JSON object or null, not a string",
		},
		{
			name:       "status that is an array is rejected in strict mode too",
			handler:    okHandler(`{"status":[1],"children":[]}`),
			mode:       v1alpha1.ResponseUnmarshallModeStrict,
			wantReason: ReasonDecode,
			wantMsg:    "status must be a JSON object or null, not an array",
		},
		{
			name:       "unknown field is rejected in strict mode",
			handler:    okHandler(`{"status":{},"children":[],"resyncAfterSecond":5}`),
			mode:       v1alpha1.ResponseUnmarshallModeStrict,
			wantReason: ReasonDecode,
			wantMsg:    `unknown field "resyncAfterSecond"`,
		},
		{
			name:       "duplicate field is rejected in strict mode",
			handler:    okHandler(`{"status":{},"children":[],"finalized":false,"finalized":true}`),
			mode:       v1alpha1.ResponseUnmarshallModeStrict,
			wantReason: ReasonDecode,
			wantMsg:    `duplicate field "finalized"`,
		},
		{
			name:       "decode errors quoting a huge child are shortened",
			handler:    okHandler(`{"children":[{"apiVersion":"v1","metadata":{"name":"x"},"data":{"big":"` + strings.Repeat("x", 100000) + `"}}]}`),
			wantReason: ReasonDecode,
			wantMsg:    "more bytes)",
			check: func(t *testing.T, err error) {
				if len(err.Error()) > 1000 {
					t.Errorf("error message is %d bytes long", len(err.Error()))
				}
			},
		},
		{
			name:       "children without kind are rejected",
			handler:    okHandler(`{"children":[{"apiVersion":"v1","metadata":{"name":"x"}}]}`),
			wantReason: ReasonDecode,
			wantMsg:    "can't decode response",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			wh := urlHook(srv.URL + "/sync")
			if tc.mode != "" {
				wh.ResponseUnMarshallMode = &tc.mode
			}
			w := mustNew(t, Config{Controller: "things", Webhook: wh, MaxResponseBytes: tc.maxBytes})

			_, err := w.Sync(context.Background(), syncRequest())
			if err == nil {
				t.Fatal("want an error")
			}
			prefix := `CompositeController "things" sync hook (POST ` + srv.URL + `/sync): `
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Reason != tc.wantReason {
				t.Errorf("want a CallError with reason %q, got %#v", tc.wantReason, ce)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

func TestLooseModeIgnoresUnknownAndDuplicateFields(t *testing.T) {
	srv := httptest.NewServer(okHandler(`{"status":{"a":1},"children":[],"resyncAfterSecond":5,"finalized":false,"finalized":true}`))
	defer srv.Close()
	loose := v1alpha1.ResponseUnmarshallModeLoose
	wh := urlHook(srv.URL)
	wh.ResponseUnMarshallMode = &loose
	// v2 defaults to strict; an explicit loose wins.
	w := mustNew(t, Config{Webhook: wh, Resolved: resolved(t, v1alpha1.HookVersionV2, wh)})
	resp, err := w.Sync(context.Background(), syncRequest())
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Finalized {
		t.Errorf("want the last duplicate to win, got %+v", resp)
	}
}

func TestStrictnessDefaultsByVersion(t *testing.T) {
	for _, tc := range []struct {
		version v1alpha1.HookVersion
		want    bool
	}{{"", false}, {v1alpha1.HookVersionV1, false}, {v1alpha1.HookVersionV2, true}} {
		wh := urlHook("http://127.0.0.1:1/")
		w := mustNew(t, Config{Webhook: wh, Resolved: resolved(t, tc.version, wh)})
		if w.Strict() != tc.want {
			t.Errorf("version %q: strict = %v, want %v", tc.version, w.Strict(), tc.want)
		}
	}
}

func TestTimeoutIsReportedQuickly(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(slowHandler(release))
	defer srv.Close()
	defer close(release)
	wh := urlHook(srv.URL)
	wh.Timeout = &metav1.Duration{Duration: 200 * time.Millisecond}
	w := mustNew(t, Config{Webhook: wh})

	start := time.Now()
	_, err := w.Sync(context.Background(), syncRequest())
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("call took %s, want about 200ms", elapsed)
	}
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("error %v, want one saying timed out after 200ms", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) = false for %v", err)
	}
	var ce *CallError
	if !errors.As(err, &ce) || ce.Reason != ReasonTimeout {
		t.Errorf("want reason timeout, got %#v", ce)
	}
}

// slowHandler answers only after release is closed or the client is gone.
// It reads the body first: only then does the server notice a client that
// hung up.
func slowHandler(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestCallerCancellationIsNotATimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(slowHandler(release))
	defer srv.Close()
	defer close(release)
	w := mustNew(t, Config{Webhook: urlHook(srv.URL)})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := w.Sync(ctx, syncRequest())
	var ce *CallError
	if !errors.As(err, &ce) || ce.Reason != ReasonCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("want a canceled CallError, got %v", err)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		okHandler(okBody)(w, r)
	}))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	}))
	defer redirector.Close()

	wh := urlHook(redirector.URL)
	w := mustNew(t, Config{Webhook: wh})
	_, err := w.Sync(context.Background(), syncRequest())
	if err == nil {
		t.Fatal("want an error for a redirect")
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusFound || se.Location != target.URL+"/elsewhere" {
		t.Errorf("want StatusError 302 with the location, got %#v", se)
	}
	if !strings.Contains(err.Error(), "not followed") {
		t.Errorf("error %q does not say the redirect was not followed", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
}

func TestTransportErrorNamesControllerAndHook(t *testing.T) {
	srv := httptest.NewServer(okHandler(okBody))
	u := srv.URL
	srv.Close() // nothing listens any more
	w := mustNew(t, Config{Controller: "gone", Hook: "finalize", Webhook: urlHook(u)})
	_, err := w.Sync(context.Background(), syncRequest())
	var ce *CallError
	if !errors.As(err, &ce) || ce.Reason != ReasonTransport {
		t.Fatalf("want a transport CallError, got %v", err)
	}
	if want := `CompositeController "gone" finalize hook (POST ` + u + `): `; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if strings.Count(err.Error(), u) != 1 {
		t.Errorf("error %q repeats the URL", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
