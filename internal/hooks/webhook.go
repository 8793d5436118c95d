// Package hooks calls a controller's hooks over HTTP, for either kind: it
// resolves a webhook's URL (url or in-cluster service), TLS material and
// credentials once, and then makes calls with a timeout, a response size
// limit, no redirects, strict or loose decoding, ETag caching
// (webhook.etag), errors that name the controller and hook, and Prometheus
// metrics.
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// maxErrorBody is how much of a non-2xx answer is kept for the error.
const maxErrorBody = 1 << 10

// Webhook calls one hook of one controller. It is safe for concurrent use.
type Webhook struct {
	controller       string
	controllerKind   string // for metrics
	hook             string
	url              string
	displayURL       string // url with any userinfo redacted, for messages
	version          v1alpha1.HookVersion
	strict           bool
	timeout          time.Duration
	maxResponseBytes int64
	authHeader       string
	client           *http.Client
	now              func() time.Time
	// etags caches answers by ETag when webhook.etag is enabled; nil
	// otherwise.
	etags *etagCache
}

var (
	_ hookapi.SyncHook      = &Webhook{}
	_ hookapi.CustomizeHook = &Webhook{}
	_ hookapi.Generator     = &Webhook{}
)

// URL is the URL the hook is called at, with any password redacted so that
// it can be shown.
func (w *Webhook) URL() string { return w.displayURL }

// Version is the hook's contract version; the caller keys the request's
// children by it.
func (w *Webhook) Version() v1alpha1.HookVersion { return w.version }

// Timeout is the timeout of one call.
func (w *Webhook) Timeout() time.Duration { return w.timeout }

// Strict reports whether answers with unknown or duplicate fields are
// rejected.
func (w *Webhook) Strict() bool { return w.strict }

// CloseIdleConnections closes the Webhook's idle connections. Call it when the
// Webhook is replaced, e.g. after its controller changed.
func (w *Webhook) CloseIdleConnections() { w.client.CloseIdleConnections() }

// Sync calls the hook with a sync (or finalize) request.
func (w *Webhook) Sync(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	resp := &hookapi.SyncHookResponse{}
	if err := w.Call(ctx, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// SyncSent is Sync that also returns the request body it sent, byte for
// byte (nil when the request could not be encoded): a preview shows the
// hook request, and encoding it a second time for that costs as much as
// encoding it for the hook.
func (w *Webhook) SyncSent(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error) {
	return callSent[hookapi.SyncHookResponse](ctx, w, req)
}

// callSent calls w with req and decodes the answer into a Resp, returning
// the request body it sent too.
func callSent[Resp any](ctx context.Context, w *Webhook, req any) (*Resp, []byte, error) {
	body, err := encodeRequest(req)
	if err != nil {
		return nil, nil, w.fail(ReasonEncode, fmt.Errorf("can't encode request: %w", err))
	}
	resp := new(Resp)
	if err := w.call(ctx, body, req, resp); err != nil {
		return nil, body, err
	}
	return resp, body, nil
}

// Customize calls the hook with a customize request.
func (w *Webhook) Customize(ctx context.Context, req *hookapi.CustomizeHookRequest) (*hookapi.CustomizeHookResponse, error) {
	resp := &hookapi.CustomizeHookResponse{}
	if err := w.Call(ctx, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Generate calls a patch hook with the desired children.
func (w *Webhook) Generate(ctx context.Context, req *hookapi.GenerateRequest) (*hookapi.GenerateResponse, error) {
	resp := &hookapi.GenerateResponse{}
	if err := w.Call(ctx, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Call POSTs request as JSON and decodes the answer into response, a pointer.
// Every error is a *CallError.
func (w *Webhook) Call(ctx context.Context, request any, response any) error {
	body, err := encodeRequest(request)
	if err != nil {
		return w.fail(ReasonEncode, fmt.Errorf("can't encode request: %w", err))
	}
	return w.call(ctx, body, request, response)
}

// encodeRequest is json.Marshal(request). A sync request writes its own
// compact JSON, the observed children most of it; through json.Marshal
// its bytes would be scanned and copied twice more, for each hook call.
func encodeRequest(request any) ([]byte, error) {
	if r, ok := request.(*hookapi.SyncHookRequest); ok && r != nil {
		return r.MarshalJSON()
	}
	return json.Marshal(request)
}

// call POSTs body, request encoded, and decodes the answer into response.
func (w *Webhook) call(ctx context.Context, body []byte, request any, response any) error {
	callCtx, cancel := context.WithTimeoutCause(ctx, w.timeout, &timeoutError{after: w.timeout})
	defer cancel()

	req, err := w.newRequest(callCtx, body)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("controller", w.controller, "hook", w.hook, "url", w.displayURL)
	offer := w.offerCached(req, request)

	code := "error"
	end := w.observeCall(logger)
	defer func() { end(code) }()

	resp, err := w.client.Do(req)
	if err != nil {
		return w.transportFailure(callCtx, err)
	}
	defer func() {
		// Drain a little so that the connection can be reused, but not an
		// unbounded amount from a misbehaving hook.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}()
	code = strconv.Itoa(resp.StatusCode)
	return w.readAnswer(callCtx, logger, resp, offer, response)
}

// newRequest is the POST of body to the hook, with its credentials.
func (w *Webhook) newRequest(callCtx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, w.fail(ReasonEncode, fmt.Errorf("can't build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if w.authHeader != "" {
		req.Header.Set("Authorization", w.authHeader)
	}
	return req, nil
}

// etagOffer is what a call knows of the ETag cache (webhook.etag): the
// request's key, when it has one, and the entry offered as If-None-Match.
// A 304 is answered from that entry rather than from whatever the cache
// holds when the answer arrives: a concurrent call may have stored a newer
// answer under another ETag, and the 304 only vouches for the one that was
// sent.
type etagOffer struct {
	key    etagKey
	keyed  bool
	cached *etagEntry
}

// offerCached offers the cached answer to request, if any, with
// If-None-Match.
func (w *Webhook) offerCached(req *http.Request, request any) etagOffer {
	var offer etagOffer
	if w.etags == nil {
		return offer
	}
	if offer.key, offer.keyed = etagKeyOf(request); offer.keyed {
		if e, ok := w.etags.get(offer.key); ok {
			offer.cached = &e
			req.Header.Set(headerIfNoneMatch, e.etag)
		}
	}
	return offer
}

// observeCall counts a call in flight until the function it returns is
// called with the answer's status code ("error" for none), which records
// the call in the metrics and the log.
func (w *Webhook) observeCall(logger klog.Logger) func(code string) {
	start := time.Now()
	mc := metacontrollerMetrics[w.hook]
	if mc != nil {
		mc.inFlight.WithLabelValues(w.displayURL, w.controller, w.controllerKind).Inc()
	}
	return func(code string) {
		elapsed := time.Since(start)
		hookRequests.WithLabelValues(w.controller, w.hook, code).Inc()
		hookDuration.WithLabelValues(w.controller, w.hook).Observe(elapsed.Seconds())
		if mc != nil {
			mc.inFlight.WithLabelValues(w.displayURL, w.controller, w.controllerKind).Dec()
			// As Metacontroller's instrumented client counts: answered
			// calls only.
			if code != "error" {
				mc.requests.WithLabelValues(code, "post", w.displayURL, w.controller, w.controllerKind).Inc()
				mc.duration.WithLabelValues("post", w.displayURL, w.controller, w.controllerKind).Observe(elapsed.Seconds())
			}
		}
		logger.V(5).Info("Called hook", "code", code, "duration", elapsed)
	}
}

// readAnswer decodes the hook's answer into response: a 429, a non-2xx
// status or an answer that does not decode is an error; a 304 to an
// offered ETag is the cached answer; a new answer with an ETag is cached.
func (w *Webhook) readAnswer(callCtx context.Context, logger klog.Logger, resp *http.Response, offer etagOffer, response any) error {
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return w.fail(ReasonTooManyRequests, &TooManyRequestsError{RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), w.now())})
	case offer.cached != nil && notModified(resp.StatusCode):
		logger.V(5).Info("Hook answer unchanged, using the cached answer", "etag", offer.cached.etag, "cacheKey", offer.key)
		if err := w.decode(offer.cached.body, response); err != nil {
			return w.fail(ReasonDecode, err)
		}
		return nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return w.fail(ReasonStatus, &StatusError{
			Code:     resp.StatusCode,
			Body:     readSnippet(resp.Body),
			Location: resp.Header.Get("Location"),
		})
	}

	buf, err := w.readBody(callCtx, resp)
	if err != nil {
		return err
	}
	defer putAnswerBuffer(buf)
	data := buf.Bytes()
	if err := w.decode(data, response); err != nil {
		return w.fail(ReasonDecode, err)
	}
	// Only answers that decoded are kept (Metacontroller keeps any 200):
	// offering the ETag of a rejected answer would invite a 304 that fails
	// again, instead of a full answer that may have been fixed. An answer
	// without an ETag leaves the entry as it is, as in Metacontroller.
	if offer.keyed {
		if etag := resp.Header.Get(headerETag); etag != "" {
			// The cache keeps the answer past this call: a copy of
			// its own, the buffer goes back to the pool.
			w.etags.set(offer.key, etag, bytes.Clone(data))
			logger.V(5).Info("Cached hook answer", "etag", etag, "cacheKey", offer.key)
		}
	}
	return nil
}

// readBody reads a 2xx answer's body, up to the response size limit, into
// a buffer of answerBuffers, which the caller puts back once it has decoded
// it. io.ReadAll grew a new slice for every answer, doubling it from 512
// bytes: a tenth of what a B2 hook call allocated.
func (w *Webhook) readBody(callCtx context.Context, resp *http.Response) (*bytes.Buffer, error) {
	if resp.ContentLength > w.maxResponseBytes {
		return nil, w.fail(ReasonTooLarge, fmt.Errorf("response larger than %d bytes", w.maxResponseBytes))
	}
	buf := answerBuffers.Get().(*bytes.Buffer)
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, w.maxResponseBytes+1)); err != nil {
		putAnswerBuffer(buf)
		return nil, w.transportFailure(callCtx, fmt.Errorf("can't read response: %w", err))
	}
	if int64(buf.Len()) > w.maxResponseBytes {
		putAnswerBuffer(buf)
		return nil, w.fail(ReasonTooLarge, fmt.Errorf("response larger than %d bytes", w.maxResponseBytes))
	}
	return buf, nil
}

// answerBuffers are the buffers hook answers are read into, shared by
// every Webhook: decoding copies what it keeps out of the bytes.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer is the largest buffer put back in answerBuffers: one
// hook's rare 16 MiB answer is not kept alive for every later call.
const maxPooledAnswer = 1 << 20

func putAnswerBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledAnswer {
		return
	}
	buf.Reset()
	answerBuffers.Put(buf)
}

// transportFailure classifies an error of sending or reading: our timeout,
// the caller giving up, or a transport failure.
func (w *Webhook) transportFailure(callCtx context.Context, err error) error {
	if callCtx.Err() != nil {
		cause := context.Cause(callCtx)
		var te *timeoutError
		if errors.As(cause, &te) {
			return w.fail(ReasonTimeout, te)
		}
		return w.fail(ReasonCanceled, fmt.Errorf("call abandoned: %w", cause))
	}
	// url.Error repeats the method and URL that CallError already names.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return w.fail(ReasonTransport, err)
}

func (w *Webhook) fail(reason string, err error) error {
	switch reason {
	case ReasonCanceled, ReasonEncode:
		// Not the hook's fault; counting them would page people for
		// shutdowns and programming errors.
	default:
		hookErrors.WithLabelValues(w.controller, w.hook, reason).Inc()
	}
	return &CallError{Kind: w.controllerKind, Controller: w.controller, Hook: w.hook, URL: w.displayURL, Reason: reason, Err: err}
}

// decode reads an answer into response. Two answers that a JSON decoder
// takes without complaint are refused first, because acting on them would
// act on something the hook did not say: bytes that are not UTF-8 (JSON
// text is UTF-8, RFC 8259 8.1; the decoder would turn them into U+FFFD, and
// a child's name or data with it would be deleted and recreated, or
// changed), and a bare null (decoded as the empty answer, whose missing
// children mean "delete every child").
func (w *Webhook) decode(data []byte, response any) error {
	if !utf8.Valid(data) {
		return errors.New("can't decode response: it is not valid UTF-8, which JSON must be")
	}
	if string(bytes.TrimSpace(data)) == "null" {
		return errors.New("can't decode response: it is null, not a JSON object")
	}
	// A strict hook's answer stays with sigs.k8s.io/json, which also
	// refuses a key its status repeats.
	if sync, ok := response.(*hookapi.SyncHookResponse); ok && !w.strict && isEmptyAnswer(sync) {
		if answer, usual := decodeSyncAnswer(data); usual {
			*sync = *answer
			return nil
		}
	}
	var err error
	if w.strict {
		var strictErrs []error
		strictErrs, err = kjson.UnmarshalStrict(data, response)
		if err == nil && len(strictErrs) > 0 {
			return fmt.Errorf("can't decode response strictly (responseUnMarshallMode strict): %w", utilerrors.NewAggregate(strictErrs))
		}
	} else {
		err = kjson.UnmarshalCaseSensitivePreserveInts(data, response)
	}
	if err == nil {
		return nil
	}
	if _, ok := response.(*hookapi.SyncHookResponse); ok {
		if kind := nonObjectStatus(data); kind != "" {
			return fmt.Errorf("can't decode response: status must be a JSON object or null, not %s", kind)
		}
	}
	return fmt.Errorf("can't decode response: %w", &truncatedError{err: err})
}

// nonObjectStatus returns the JSON kind of the answer's "status" when it is
// neither an object nor null, for an error that says what is wrong instead of
// naming Go types.
func nonObjectStatus(data []byte) string {
	var probe struct {
		Status json.RawMessage `json:"status"`
	}
	if kjson.UnmarshalCaseSensitivePreserveInts(data, &probe) != nil {
		return ""
	}
	s := bytes.TrimSpace(probe.Status)
	if len(s) == 0 {
		return ""
	}
	switch s[0] {
	case '{', 'n':
		return ""
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// readSnippet reads the start of an error answer as printable text.
func readSnippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxErrorBody))
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return strings.TrimSpace(string(b))
}

// parseRetryAfter parses Retry-After as seconds or an HTTP date (RFC 9110
// 10.2.3); anything else, or a time in the past, means no advice (0).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			// HTTP dates have whole seconds; round up so that a retry is
			// not early.
			if r := d % time.Second; r != 0 {
				d += time.Second - r
			}
			return d
		}
	}
	return 0
}
