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

// startPublishSpan starts the span of one row's publish as a child of the
// trace stored in the row's headers h (see Add), or of a new trace when the
// row has none, and returns h with that span written into it: the headers
// of the message, so that the consumer's span is the publish's child. A
// republish of the row is a span of its own under the same parent.
func (r *Relay) startPublishSpan(ctx context.Context, subject, id string, h map[string]string) (map[string]string, trace.Span) {
	ctx, span := r.tracer.Start(tracing.Extract(ctx, h), "publish "+subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessageAttributes(subject, id)...),
		trace.WithAttributes(semconv.MessagingOperationTypeSend))
	if h == nil {
		h = make(map[string]string, 2)
	}
	tracing.Inject(ctx, h)
	return h, span
}

// endPublishSpans ends each started span with its row's publish error (nil:
// JetStream stored it, or dropped it as a duplicate, which acked marks).
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
