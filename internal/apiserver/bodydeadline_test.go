package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// slowBody sends a byte every interval, n bytes in all, then ends.
type slowBody struct {
	n        int
	interval time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.interval)
	b.n--
	p[0] = 'x'
	return 1, nil
}

func TestBodyDeadline(t *testing.T) {
	const within = 300 * time.Millisecond
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, tc := range []struct {
			name string
			body func() io.Reader
			// wait is how long the handler works after reading the body.
			wait     time.Duration
			wantCode int
		}{
			// A byte every 50ms would take 50s: it ends at the deadline.
			{name: "a body trickling in gets 408 at the deadline", body: func() io.Reader { return &slowBody{n: 1000, interval: 50 * time.Millisecond} }, wantCode: http.StatusRequestTimeout},
			{name: "a body in time is read whole", body: func() io.Reader { return strings.NewReader(strings.Repeat("x", 1<<20)) }, wantCode: http.StatusOK},
			// The deadline is lifted with the body: a handler working past
			// it is not taken for a client gone away.
			{name: "work past the deadline is not cut short", body: func() io.Reader { return strings.NewReader("{}") }, wait: 3 * within, wantCode: http.StatusOK},
		} {
			t.Run(proto+" "+tc.name, func(t *testing.T) {
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					data, err := io.ReadAll(r.Body)
					if err != nil {
						var status apierrors.APIStatus
						if !errors.As(err, &status) {
							t.Errorf("reading the body: %v, want a Status", err)
							w.WriteHeader(http.StatusInternalServerError)
							return
						}
						// The handler must be able to answer: the
						// deadline is not a client gone away. (A
						// cancellation would come a moment later.)
						time.Sleep(100 * time.Millisecond)
						if err := r.Context().Err(); err != nil {
							t.Errorf("the request's context ended with the body's deadline: %v", err)
						}
						w.WriteHeader(int(status.Status().Code))
						_, _ = io.WriteString(w, status.Status().Message)
						return
					}
					select {
					case <-time.After(tc.wait):
					case <-r.Context().Done():
						t.Errorf("the request's context ended while the handler worked: %v", r.Context().Err())
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					_, _ = io.WriteString(w, strings.Repeat("y", len(data)%7))
				})
				srv := httptest.NewUnstartedServer(withBodyDeadline(handler, within))
				srv.EnableHTTP2 = proto == "HTTP/2.0"
				srv.StartTLS()
				defer srv.Close()
				client := srv.Client()
				if proto == "HTTP/1.1" {
					client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: client.Transport.(*http.Transport).TLSClientConfig.RootCAs}
					client.Transport.(*http.Transport).ForceAttemptHTTP2 = false
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, tc.body())
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("no answer after %s: %v", time.Since(start), err)
				}
				defer resp.Body.Close()
				msg, _ := io.ReadAll(resp.Body)
				if resp.Proto != proto {
					t.Fatalf("spoke %s, want %s", resp.Proto, proto)
				}
				if resp.StatusCode != tc.wantCode {
					t.Errorf("HTTP %d %s, want %d", resp.StatusCode, msg, tc.wantCode)
				}
				if elapsed := time.Since(start); tc.wantCode == http.StatusRequestTimeout && elapsed > 10*within {
					t.Errorf("answered after %s, want about %s", elapsed, within)
				}
			})
		}
	}
}

// TestBodyDeadlineKeepsClientCancellation: a client that goes away still
// cancels the request's context, as net/http does: one sending a body,
// before the deadline, and one of a request without a body (a watch), even
// long after it.
func TestBodyDeadlineKeepsClientCancellation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		body   func() io.Reader
		h2     bool
		within time.Duration
	}{
		{"a body over HTTP/1.1, before the deadline", http.MethodPost, func() io.Reader { return &slowBody{n: 1000, interval: 50 * time.Millisecond} }, false, time.Minute},
		{"a body over HTTP/2, before the deadline", http.MethodPost, func() io.Reader { return &slowBody{n: 1000, interval: 50 * time.Millisecond} }, true, time.Minute},
		{"a GET over HTTP/2, after the deadline", http.MethodGet, func() io.Reader { return nil }, true, 50 * time.Millisecond},
		{"a GET over HTTP/1.1, after the deadline", http.MethodGet, func() io.Reader { return nil }, false, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testClientCancellation(t, tc.method, tc.body(), tc.h2, tc.within)
		})
	}
}

func testClientCancellation(t *testing.T, method string, body io.Reader, h2 bool, within time.Duration) {
	canceled := make(chan error, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A watch never reads its (empty) body.
		if r.Method != http.MethodGet {
			_, _ = io.ReadAll(r.Body)
		}
		select {
		case <-r.Context().Done():
			canceled <- nil
		case <-time.After(5 * time.Second):
			canceled <- errors.New("the request's context was not canceled after the client went away")
		}
	})
	srv := httptest.NewUnstartedServer(withBodyDeadline(handler, within))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	defer srv.Close()
	if !h2 {
		transport := srv.Client().Transport.(*http.Transport)
		transport.ForceAttemptHTTP2 = false
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, srv.URL, body)
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	if _, err := srv.Client().Do(req); err == nil {
		t.Fatal("the request went through")
	}
	if err := <-canceled; err != nil {
		t.Error(err)
	}
}
