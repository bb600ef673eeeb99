package pspsim

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/tracing"
)

// tracerScope names the simulator's spans' instrumentation scope.
const tracerScope = "github.com/oncemall/oncemall/services/psp-sim/pspsim"

// The attributes of a delivery span beside tracing.DuplicateKey.
const (
	// copyKey is the copy of the notification (0 is the first; in storm
	// mode copies 0 to Copies-1 go out at once, late replays follow).
	copyKey = attribute.Key("psp.copy")
	// tryKey is the attempt of that copy, from 1; a retry is try > 1.
	tryKey = attribute.Key("psp.try")
	// answerLostKey is true when the merchant's 2xx answer was lost on
	// the way back (lost_answers), so the copy is retried.
	answerLostKey = attribute.Key("psp.answer_lost")
	// serialKey is the platform serial of the charge or refund notified.
	serialKey = attribute.Key("psp.serial")
)

// route registers h under pattern, served in a server span named by the
// pattern ("POST /charges") that continues the caller's trace, when the
// simulator traces.
func (s *Simulator) route(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	if s.tracer == nil {
		mux.HandleFunc(pattern, h)
		return
	}
	mux.Handle(pattern, otelhttp.NewHandler(h, pattern,
		otelhttp.WithTracerProvider(s.cfg.TracerProvider),
		otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider())))
}

// traceOf returns the trace headers of ctx (the request that made a charge
// or a refund), which its notification is delivered in; nil when the
// simulator does not trace.
func (s *Simulator) traceOf(ctx context.Context) map[string]string {
	if s.tracer == nil {
		return nil
	}
	h := map[string]string{}
	tracing.Inject(ctx, h)
	return h
}

// startDelivery starts the span of one delivery attempt in d's trace and
// writes its traceparent, and the request id of the trace's baggage as
// X-Request-ID, into the request's headers h. Every attempt but
// the notification's very first is marked duplicate=true: the merchant may
// have it already (a storm's other copies, a retry, a late replay), which
// is what its handler must absorb. The returned end records the answer.
// Without tracing it does nothing.
func (s *Simulator) startDelivery(d *Deliveries, copyNo, try int, h http.Header) (ctx context.Context, end func(status int, lost bool, err error)) {
	if s.tracer == nil {
		return s.ctx, func(int, bool, error) {}
	}
	ctx, span := s.tracer.Start(tracing.Extract(s.ctx, d.trace), "notify "+d.what,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			serialKey.String(d.id), copyKey.Int(copyNo), tryKey.Int(try),
			tracing.DuplicateKey.Bool(copyNo != 0 || try != 1),
			semconv.HTTPRequestMethodKey.String(http.MethodPost), semconv.URLFull(d.NotifyURL)))
	tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(h))
	if id := tracing.RequestID(ctx); id != "" {
		span.SetAttributes(tracing.RequestIDKey.String(id))
		h.Set(tracing.RequestIDHeader, id)
	}
	return ctx, func(status int, lost bool, err error) {
		if status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		span.SetAttributes(answerLostKey.Bool(lost))
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case status/100 != 2:
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
}
