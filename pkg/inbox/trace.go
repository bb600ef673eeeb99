package inbox

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// tracerScope names the inbox's spans' instrumentation scope.
const tracerScope = "github.com/oncemall/oncemall/pkg/inbox"

// startSpan starts the span of one delivery as a child of the trace msg
// carries (the relay's publish span), or of a new trace when it carries
// none. The returned context also carries the request id of the trace's
// baggage for the logger.
func (c *Consumer) startSpan(ctx context.Context, msg Message) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(tracing.Extract(ctx, msg.Headers), "process "+msg.Subject,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.MessageAttributes(msg.Subject, msg.ID)...),
		trace.WithAttributes(
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingConsumerGroupName(c.cfg.Name),
			tracing.ConsumerKey.String(c.cfg.Name),
			tracing.DeliveryKey.Int64(int64(msg.Delivered))))
	if id := tracing.RequestID(ctx); id != "" {
		span.SetAttributes(tracing.RequestIDKey.String(id))
		ctx = logging.WithRequestID(ctx, id)
	}
	return ctx, span
}

// endSpan ends a delivery's span with its outcome: duplicate=true when the
// dedup row said the message was already processed, an error status when
// the handler failed (to be retried, or dead).
func endSpan(span trace.Span, out Outcome, err error) {
	span.SetAttributes(tracing.OutcomeKey.String(string(out)), tracing.DuplicateKey.Bool(out == Duplicate))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
