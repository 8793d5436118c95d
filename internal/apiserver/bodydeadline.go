package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// withBodyLimits adds the limits of request bodies to the handler chain
// build makes: withBodyDeadline in front of it, with half the request
// timeout for the body (the other half is left for the work), and
// withBodyDepthLimit at its end, once the request is authenticated and
// authorized.
func withBodyLimits(build func(http.Handler, *genericapiserver.Config) http.Handler) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		inner := withBodyDepthLimit(apiHandler, maxBodyDepth, c.MaxRequestBodyBytes)
		return withBodyDeadline(build(inner, c), c.RequestTimeout/2)
	}
}

// withBodyDeadline gives a request's body within to arrive, and answers 408
// when it does not.
//
// The generic server's request timeout does not bound a body that trickles
// in: its 504 waits for net/http, which first reads what is left of the
// body, so a client sending a byte now and then holds a handler, and a slot
// of --max-mutating-requests-inflight, for as long as it likes. A read
// deadline on the connection (on the stream, for HTTP/2) ends the read
// instead. It is lifted once the body is read, so that a long request (a
// /sync waiting for its hook) is not taken for a client gone away.
//
// It must wrap the whole chain: it needs net/http's own ResponseWriter.
func withBodyDeadline(handler http.Handler, within time.Duration) http.Handler {
	if within <= 0 {
		return handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Only writes have bodies to wait for; a long-running GET (a
		// watch) over HTTP/2 has a Body too, an empty one, and must keep
		// seeing its client go away.
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 ||
			(req.Method != http.MethodPost && req.Method != http.MethodPut && req.Method != http.MethodPatch) {
			handler.ServeHTTP(w, req)
			return
		}
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(within)
		if err := rc.SetReadDeadline(deadline); err != nil {
			handler.ServeHTTP(w, req)
			return
		}
		body := &deadlineBody{ReadCloser: req.Body, rc: rc, within: within, deadline: deadline}
		req.Body = body
		// Over HTTP/1.1, net/http cancels the request's context when a
		// read of the connection fails, at the deadline too, and the
		// generic server then answers 504 or drops the connection. Keep
		// that for a client gone away, not for a body out of time, which
		// gets its 408.
		ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
		defer cancel()
		stop := context.AfterFunc(req.Context(), func() {
			if !body.outOfTime() {
				cancel()
			}
		})
		defer stop()
		handler.ServeHTTP(w, req.WithContext(ctx))
	})
}

// deadlineBody turns the read deadline's error into a 408 Status, and lifts
// the deadline at the end of the body.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	within   time.Duration
	deadline time.Time
	lifted   atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusRequestTimeout,
			Reason:  metav1.StatusReasonTimeout,
			Message: fmt.Sprintf("the request body did not arrive within %s", b.within),
		}}
	case errors.Is(err, io.EOF) && !b.lifted.Load():
		// Only at the end: what net/http reads of a body left unread
		// after the handler (up to 256 KiB) must stay bounded.
		b.lifted.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// outOfTime tells whether the body's deadline has passed before it was
// read whole.
func (b *deadlineBody) outOfTime() bool {
	return !b.lifted.Load() && !time.Now().Before(b.deadline)
}
