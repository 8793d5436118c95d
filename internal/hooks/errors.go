package hooks

import (
	"context"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// Reasons a hook call failed; the reason label of
// composite_hook_errors_total and CallError.Reason.
const (
	// ReasonTimeout: the hook did not answer within the webhook's timeout.
	ReasonTimeout = "timeout"
	// ReasonTransport: the request failed below HTTP (DNS, connect, TLS,
	// connection reset, ...).
	ReasonTransport = "transport"
	// ReasonStatus: the hook answered a non-2xx status other than 429.
	ReasonStatus = "status"
	// ReasonDecode: the answer was not the JSON the contract expects.
	ReasonDecode = "decode"
	// ReasonTooLarge: the answer exceeded the response size limit.
	ReasonTooLarge = "too_large"
	// ReasonTooManyRequests: the hook answered 429.
	ReasonTooManyRequests = "too_many_requests"
	// ReasonCanceled: the caller's context ended before the hook answered.
	// This is not a hook failure and is not counted in the error metric.
	ReasonCanceled = "canceled"
	// ReasonEncode: the request could not be encoded; nothing was sent.
	ReasonEncode = "encode"
)

// CallError is every error Call returns. Its message names the controller,
// the hook and the URL, so that it can be shown to users as is; Unwrap gives
// the cause, so errors.As still finds *StatusError, *TooManyRequestsError,
// TLS and x509 errors.
type CallError struct {
	// Kind is the controller's kind.
	Kind       string
	Controller string
	Hook       string
	// URL is the hook's URL with any credentials redacted.
	URL string
	// Reason is one of the Reason constants.
	Reason string
	Err    error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("%s %q %s hook (POST %s): %v", kindOrComposite(e.Kind), e.Controller, e.Hook, e.URL, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// StatusError is a non-2xx answer other than 429.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Body is the start (at most 1 KiB) of the answer's body, for humans.
	Body string
	// Location is the Location header of a redirect, which is never
	// followed.
	Location string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("hook answered HTTP %d %s", e.Code, http.StatusText(e.Code))
	switch {
	case e.Code == http.StatusNotModified:
		// Not a redirect: the hook thinks it answers an If-None-Match,
		// so say why there was none.
		msg += " to a request without If-None-Match: 304 may only answer a request that offers the ETag of a cached answer (webhook.etag)"
	case e.Code >= 300 && e.Code < 400:
		// Following redirects would let a hook send the request, which may
		// carry credentials, somewhere the controller author did not name.
		msg += fmt.Sprintf(" with a redirect to %q, which was not followed: hooks must answer directly", e.Location)
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// TooManyRequestsError is a 429 answer: the hook asks to be called again
// later, after RetryAfter if it said when (0 otherwise).
type TooManyRequestsError struct {
	RetryAfter time.Duration
}

func (e *TooManyRequestsError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("hook answered HTTP 429 Too Many Requests, retry after %s", e.RetryAfter)
	}
	return "hook answered HTTP 429 Too Many Requests"
}

// RetryDelay is RetryAfter, for callers that know the error only by this
// method (internal/reconcile), so that they need not import this package.
func (e *TooManyRequestsError) RetryDelay() time.Duration { return e.RetryAfter }

// timeoutError is the cause of the per-call context, so that a call that ran
// out of time says how long it had rather than "context deadline exceeded".
type timeoutError struct {
	after time.Duration
}

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %s", e.after) }

// Timeout marks the error as a timeout for callers that check net.Error.
func (e *timeoutError) Timeout() bool { return true }

// Is lets errors.Is(err, context.DeadlineExceeded) find a hook timeout.
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// maxErrorMessage bounds the message of a decode error. Some quote the
// offending JSON (apimachinery quotes a whole child without a kind), and the
// message ends up in the controller's status and in events.
const maxErrorMessage = 512

// truncatedError shortens the message of err but keeps it for errors.As.
type truncatedError struct{ err error }

func (e *truncatedError) Error() string {
	msg := e.err.Error()
	if len(msg) <= maxErrorMessage {
		return msg
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf("... (%d more bytes)", len(msg)-cut)
}

func (e *truncatedError) Unwrap() error { return e.err }
