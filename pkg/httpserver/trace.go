package httpserver

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// tracingMiddleware returns the middleware that serves each request in a
// server span, continuing the caller's trace when the request carries a
// traceparent. The span is named after the route template ("POST
// /orders/:no/pay"), never the path, so one endpoint is one name however
// many orders there are. It carries the request id as an attribute, and the
// request id is put in the trace's baggage, where it travels with the trace
// into the outbox, the messages and the calls the handler makes. RequestID
// must run before it.
//
// The health, readiness and metrics endpoints are not traced: probes and
// scrapes every few seconds would bury the traces worth reading.
func tracingMiddleware(tp trace.TracerProvider) []gin.HandlerFunc {
	return []gin.HandlerFunc{
		otelgin.Middleware("",
			otelgin.WithTracerProvider(tp),
			otelgin.WithPropagators(tracing.Propagator()),
			// Request metrics are ours (http_requests_total); otelgin's
			// meter is a no-op so it does not reach for the global one.
			otelgin.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelgin.WithGinFilter(func(c *gin.Context) bool { return !isProbe(c.Request.URL.Path) })),
		traceRequestID,
	}
}

// traceRequestID runs inside the server span: it records the request id on
// the span and in the baggage.
func traceRequestID(c *gin.Context) {
	if isProbe(c.Request.URL.Path) {
		c.Next()
		return
	}
	ctx := c.Request.Context()
	id := logging.RequestID(ctx)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.RequestIDKey.String(id))
	}
	c.Request = c.Request.WithContext(tracing.WithRequestID(ctx, id))
	c.Next()
}

func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}
