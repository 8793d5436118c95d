package target

import (
	"net/http"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// TraceOnlyWithin lets the transport wrapper of config run only for a
// request made within a trace: one whose context carries a span context
// or baggage, as /sync's requests do when kube-apiserver's request to it
// was traced.
//
// It is for a server that traces nothing itself (no --tracing-config-file).
// k8s.io/apiserver's CoreAPIOptions wraps the clients of the cluster it
// reaches in OpenTelemetry's otelhttp even then, with a no-op tracer, so
// that a traced request's context is passed on to the requests it makes.
// The controller loop's requests are in no trace, and the wrapper only
// spends on them: about 4% of the server's CPU while the loop converges
// 2,000 parents (BenchmarkTraceOnlyWithin has the cost per request). The
// wrapper CoreAPIOptions adds is its only one; a wrapper added later for
// another reason would be skipped outside traces too.
func TraceOnlyWithin(config *rest.Config) {
	wrap := config.WrapTransport
	if wrap == nil {
		return
	}
	config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return &inTraceOnly{traced: wrap(rt), plain: rt}
	}
}

// inTraceOnly sends a request through traced when it is within a trace,
// and straight to plain otherwise.
type inTraceOnly struct {
	traced, plain http.RoundTripper
}

func (t *inTraceOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		return t.traced.RoundTrip(req)
	}
	return t.plain.RoundTrip(req)
}

// WrappedRoundTripper lets client-go see through the wrapper, as it does
// through its own, to the plain transport (to cancel requests, close idle
// connections).
func (t *inTraceOnly) WrappedRoundTripper() http.RoundTripper { return t.plain }

var _ utilnet.RoundTripperWrapper = &inTraceOnly{}
