package tracing

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns base wrapped so that every request runs in a client
// span and carries its context's trace to the server (traceparent, and the
// baggage with the request id), and the request id itself as X-Request-ID
// unless the request sets one, so the server's span and log lines name the
// request that started the work rather than a new id: what a service's HTTP client needs to keep
// one trace across a call to another service, in one line,
//
//	client := &http.Client{Timeout: t, Transport: tracing.Transport(w.TracerProvider, http.DefaultTransport)}
//
// The request must be made with its context (http.NewRequestWithContext).
// When tracing is off it returns base itself.
func Transport(tp trace.TracerProvider, base http.RoundTripper) http.RoundTripper {
	if !Enabled(tp) {
		return base
	}
	// Metrics stay with Prometheus; the meter is a no-op so otelhttp does
	// not reach for the global one.
	return otelhttp.NewTransport(requestIDTransport{base},
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}

// RequestIDHeader is the header a request id travels in between our
// programs, the one pkg/httpserver reads (and answers with).
const RequestIDHeader = "X-Request-ID"

// requestIDTransport sets X-Request-ID from the context's baggage on a
// request that has none.
type requestIDTransport struct{ base http.RoundTripper }

func (t requestIDTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(RequestIDHeader) == "" {
		if id := RequestID(req.Context()); id != "" {
			// A RoundTripper must not change the caller's request.
			req = req.Clone(req.Context())
			req.Header.Set(RequestIDHeader, id)
		}
	}
	return t.base.RoundTrip(req)
}
