package target

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/tracing"
)

// namespaceServer answers every request with a Namespace and hands each
// request's traceparent header to seen.
func namespaceServer(t testing.TB, seen func(traceparent string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r.Header.Get("traceparent"))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default","resourceVersion":"1"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// coreAPIConfig is a client configuration as k8s.io/apiserver's
// CoreAPIOptions makes it for a server that traces nothing: wrapped in
// otelhttp with a no-op tracer.
func coreAPIConfig(host string) *rest.Config {
	config := &rest.Config{Host: host}
	config.Wrap(tracing.WrapperFor(tracing.NewNoopTracerProvider()))
	return config
}

// traced is a context within a trace, as the generic server's tracing
// filter leaves a request's context when kube-apiserver's request carried
// a traceparent header.
func traced(t testing.TB) context.Context {
	traceID, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil {
		t.Fatal(err)
	}
	spanID, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

func TestTraceOnlyWithinPassesATracedRequestsContextOn(t *testing.T) {
	var got atomic.Value
	srv := namespaceServer(t, func(tp string) { got.Store(tp) })
	config := coreAPIConfig(srv.URL)
	TraceOnlyWithin(config)
	client := kubernetes.NewForConfigOrDie(config)

	if _, err := client.CoreV1().Namespaces().Get(traced(t), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// The trace ID travels on; the span ID is the no-op tracer's, the
	// incoming one.
	if tp := got.Load().(string); tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("a request within a trace sent traceparent %q, want the trace it is in", tp)
	}
	if _, err := client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if tp := got.Load().(string); tp != "" {
		t.Errorf("a request in no trace sent traceparent %q, want none", tp)
	}
}

func TestTraceOnlyWithinSkipsTheWrapperOutsideATrace(t *testing.T) {
	srv := namespaceServer(t, nil)
	var wrapped atomic.Int32
	config := &rest.Config{Host: srv.URL}
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			wrapped.Add(1)
			return rt.RoundTrip(req)
		})
	})
	TraceOnlyWithin(config)
	client := kubernetes.NewForConfigOrDie(config)

	if _, err := client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := wrapped.Load(); n != 0 {
		t.Errorf("a request in no trace went through the wrapper %d times, want none", n)
	}
	if _, err := client.CoreV1().Namespaces().Get(traced(t), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := wrapped.Load(); n != 1 {
		t.Errorf("a request within a trace went through the wrapper %d times, want once", n)
	}
}

func TestTraceOnlyWithinLeavesAnUnwrappedConfigAlone(t *testing.T) {
	config := &rest.Config{Host: "https://example.invalid"}
	TraceOnlyWithin(config)
	if config.WrapTransport != nil {
		t.Error("a configuration without a wrapper got one")
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// BenchmarkTraceOnlyWithin is the cost of one of the loop's requests (a GET
// decoded by a typed client, against a local server in the same process)
// through the client configuration CoreAPIOptions makes, as it makes it
// and with TraceOnlyWithin.
func BenchmarkTraceOnlyWithin(b *testing.B) {
	srv := namespaceServer(b, nil)
	for _, bc := range []struct {
		name      string
		traceOnly bool
	}{{"otelhttp-always", false}, {"trace-only-within", true}} {
		b.Run(bc.name, func(b *testing.B) {
			config := coreAPIConfig(srv.URL)
			config.QPS = -1 // no client-side limit: the request's own cost
			if bc.traceOnly {
				TraceOnlyWithin(config)
			}
			client := kubernetes.NewForConfigOrDie(config)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
