package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// seen is what a handler found in its request's context.
type seen struct {
	span      trace.SpanContext
	requestID string // the logger's
	baggageID string // the trace's baggage
}

func tracedServer(t *testing.T, tp trace.TracerProvider) (http.Handler, <-chan seen) {
	t.Helper()
	s, err := httpserver.New(httpserver.Options{
		Addr:           "127.0.0.1:0",
		Config:         httpserver.Config{BodyLimitBytes: 1 << 10},
		Logger:         testenv.Logger(t),
		Registry:       prometheus.NewRegistry(),
		TracerProvider: tp,
	})
	testenv.Must(t, err)
	got := make(chan seen, 1)
	record := func(c *gin.Context) {
		ctx := c.Request.Context()
		got <- seen{trace.SpanContextFromContext(ctx), logging.RequestID(ctx), tracing.RequestID(ctx)}
	}
	s.Engine().POST("/orders/:no/pay", func(c *gin.Context) { record(c); c.Status(http.StatusAccepted) })
	s.Engine().GET("/boom", func(c *gin.Context) { record(c); panic("boom") })
	return s.Handler(), got
}

// TestServerSpanPerRequest: a request is a server span named after its
// route template, carrying the request id as an attribute and, through the
// handler's context, in the baggage; the handler's context is in the span.
func TestServerSpanPerRequest(t *testing.T) {
	rec := spantest.NewRecorder(t)
	h, got := tracedServer(t, rec.Provider)
	req := httptest.NewRequest(http.MethodPost, "/orders/O42/pay", nil)
	req.Header.Set(httpserver.RequestIDHeader, "req-1")
	w := do(t, h, req)
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d", w.Code)
	}
	in := <-got
	span := spantest.Find(t, rec.Spans(), "POST /orders/:no/pay")
	if span.Kind != "server" || span.Parent != "" || span.Attrs["request_id"] != "req-1" || span.Attrs["http.route"] != "/orders/:no/pay" {
		t.Fatalf("server span %s, want a root server span with request_id req-1 and the route", span)
	}
	if in.span.SpanID().String() != span.SpanID || in.requestID != "req-1" || in.baggageID != "req-1" {
		t.Fatalf("the handler saw span %s, request id %q and baggage request id %q; want span %s and req-1 twice",
			in.span.SpanID(), in.requestID, in.baggageID, span.SpanID)
	}
}

// TestServerSpanContinuesTheCallersTrace: a request with a traceparent is
// served in a child of the caller's span, in the caller's trace.
func TestServerSpanContinuesTheCallersTrace(t *testing.T) {
	rec := spantest.NewRecorder(t)
	h, got := tracedServer(t, rec.Provider)
	req := httptest.NewRequest(http.MethodPost, "/orders/O42/pay", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	do(t, h, req)
	<-got
	span := spantest.Find(t, rec.Spans(), "POST /orders/:no/pay")
	if span.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || span.Parent != "00f067aa0ba902b7" {
		t.Fatalf("server span %s does not continue the caller's trace", span)
	}
}

// TestServerSpanOfAPanicFails: the recovery's 500 marks the span failed.
func TestServerSpanOfAPanicFails(t *testing.T) {
	rec := spantest.NewRecorder(t)
	h, got := tracedServer(t, rec.Provider)
	if w := do(t, h, httptest.NewRequest(http.MethodGet, "/boom", nil)); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", w.Code)
	}
	<-got
	if span := spantest.Find(t, rec.Spans(), "GET /boom"); !span.Failed || span.Attrs["http.response.status_code"] != "500" {
		t.Fatalf("span %s of a panicking handler, want failed with status 500", span)
	}
}

// TestProbesAreNotTraced: health, readiness and metrics would bury the
// traces worth reading.
func TestProbesAreNotTraced(t *testing.T) {
	rec := spantest.NewRecorder(t)
	h, _ := tracedServer(t, rec.Provider)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if w := do(t, h, httptest.NewRequest(http.MethodGet, path, nil)); w.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, w.Code)
		}
	}
	if spans := rec.Spans(); len(spans) != 0 {
		t.Fatalf("probes were traced:\n%s", spantest.List(spans))
	}
}

// TestTracingOffTouchesNoRequest: with a no-op provider (tracing off) or
// none, the middleware is not installed: an incoming traceparent is not
// even read, and the request id is not put in any baggage.
func TestTracingOffTouchesNoRequest(t *testing.T) {
	for name, tp := range map[string]trace.TracerProvider{"no-op": noop.NewTracerProvider(), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			h, got := tracedServer(t, tp)
			req := httptest.NewRequest(http.MethodPost, "/orders/O42/pay", nil)
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			req.Header.Set(httpserver.RequestIDHeader, "req-off")
			do(t, h, req)
			in := <-got
			if in.span.IsValid() || in.baggageID != "" || in.requestID != "req-off" {
				t.Fatalf("with tracing off the handler saw span %v and baggage request id %q (request id %q)", in.span, in.baggageID, in.requestID)
			}
		})
	}
}
