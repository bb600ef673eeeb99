package app

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// tracerScope names the instrumentation scope of the use cases' spans.
const tracerScope = "github.com/oncemall/oncemall/services/coupon/internal/app"

// traceOf returns the trace headers of ctx for a message landed in it (the
// order.paid delivery's span and baggage); nil when tracing is off.
func (a *App) traceOf(ctx context.Context) map[string]string {
	if a.tracer == nil {
		return nil
	}
	h := map[string]string{}
	tracing.Inject(ctx, h)
	return h
}

// startDeduction starts the span of one attempt at m, named "deduct coupon",
// as a child of the delivery that landed m, however much later the retry
// job gets to it, and linked to the job pass that made the attempt. A
// message landed without a trace gets the pass's span as its parent. The
// returned end records the outcome (duplicate=true when the coupon was
// already used by the order: the attempt was absorbed). Without tracing it
// does nothing. opts are added to the span's (a start time in the past, for
// a deduction made before its outcome decided to trace it).
func (a *App) startDeduction(ctx context.Context, m coupon.Message, opts ...trace.SpanStartOption) (context.Context, func(Outcome)) {
	if a.tracer == nil {
		return ctx, func(Outcome) {}
	}
	opts = append(opts, trace.WithAttributes(
		semconv.MessagingMessageID(m.MessageID),
		attribute.String("order_no", m.OrderNo),
		attribute.Int64("coupon_id", int64(m.CouponID)),
		attribute.Int("attempt", m.RetryCount+1),
	))
	parent := tracing.Extract(ctx, m.Trace)
	// A link to the job pass that made the attempt; none when the attempt
	// runs in the delivery that landed m (its span is the parent already,
	// and a link to it as well would hide the parent in Jaeger).
	if pass := trace.SpanContextFromContext(ctx); pass.IsValid() && len(m.Trace) > 0 && pass.SpanID() != trace.SpanContextFromContext(parent).SpanID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: pass}))
	}
	ctx, span := a.tracer.Start(parent, "deduct coupon", opts...)
	if id := tracing.RequestID(ctx); id != "" {
		span.SetAttributes(tracing.RequestIDKey.String(id))
	}
	return ctx, func(out Outcome) {
		span.SetAttributes(tracing.OutcomeKey.String(string(out)), tracing.DuplicateKey.Bool(out == Absorbed))
		span.End()
	}
}
