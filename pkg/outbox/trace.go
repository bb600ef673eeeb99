package outbox

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/tracing"
)

// tracerScope names the outbox's spans' instrumentation scope.
const tracerScope = "github.com/oncemall/oncemall/pkg/outbox"

// startPublishSpan starts the span of one message's publish as a child of
// the trace its headers h carry (see Add), or of a new trace when they
// carry none, and returns the headers that carry that span (with the
// baggage of h): set over h on the message, they make the consumer's span
// the publish's child. h itself is not written. A republish of the message
// is a span of its own under the same parent.
func (r *Relay) startPublishSpan(ctx context.Context, subject, id string, h map[string]string) (map[string]string, trace.Span) {
	ctx, span := r.tracer.Start(tracing.Extract(ctx, h), "publish "+subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessageAttributes(subject, id)...),
		trace.WithAttributes(semconv.MessagingOperationTypeSend))
	carrier := make(map[string]string, 2)
	tracing.Inject(ctx, carrier)
	return carrier, span
}

// endPublishSpans ends each started span with its message's publish error
// (nil: JetStream stored it, or dropped it as a duplicate, which acked
// marks).
func endPublishSpans(spans []trace.Span, errs []error) {
	for i, span := range spans {
		if span == nil {
			continue
		}
		if errs[i] != nil {
			span.SetStatus(codes.Error, errs[i].Error())
		}
		span.End()
	}
}
