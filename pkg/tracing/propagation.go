package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// propagator is the wire format of a trace between our programs, the same
// over HTTP and in outbox rows and JetStream messages: W3C traceparent and
// tracestate, and W3C baggage. It is a format, not a setting, and holds no
// state, so it is one value for the whole package.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator returns the propagator every program here uses, for
// instrumentation that takes one (otelgin, otelhttp).
func Propagator() propagation.TextMapPropagator { return propagator }

// Inject writes ctx's trace (traceparent, tracestate, baggage) into headers.
// It writes nothing when ctx is in no trace and carries no baggage.
func Inject(ctx context.Context, headers map[string]string) {
	propagator.Inject(ctx, propagation.MapCarrier(headers))
}

// Extract returns ctx carrying the trace and baggage that headers hold (as
// Inject wrote them), for a span that continues it; ctx itself when they
// hold none. The keys are matched exactly, as NATS headers are.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	return propagator.Extract(ctx, propagation.MapCarrier(headers))
}

// requestIDMember is the baggage member that carries the request id.
const requestIDMember = "request_id"

// WithRequestID returns ctx whose baggage carries id as request_id, so that
// the id travels with the trace into outbox rows, messages, consumers and
// the calls a service makes. An id that baggage cannot carry is left out.
func WithRequestID(ctx context.Context, id string) context.Context {
	m, err := baggage.NewMemberRaw(requestIDMember, id)
	if err != nil {
		return ctx
	}
	b, err := baggage.FromContext(ctx).SetMember(m)
	if err != nil {
		return ctx
	}
	return baggage.ContextWithBaggage(ctx, b)
}

// RequestID returns the request id ctx's baggage carries: the id of the
// HTTP request nearest upstream in the trace. "" when there is none.
func RequestID(ctx context.Context) string {
	return baggage.FromContext(ctx).Member(requestIDMember).Value()
}

// The attributes our spans add to the conventional ones. They are named as
// the log keys and metric labels that say the same thing, so one word finds
// a fact in the logs, the metrics and the traces.
const (
	// RequestIDKey is the request id: of the request itself on an HTTP
	// server span, of the request upstream on a consumer span.
	RequestIDKey = attribute.Key("request_id")
	// OutcomeKey is how a delivery or a job pass ended, with the values of
	// the outcome label of inbox_messages_total and job_runs_total.
	OutcomeKey = attribute.Key("outcome")
	// DuplicateKey is true on a delivery the inbox absorbed (already
	// processed) and on a publish JetStream dropped (already stored).
	DuplicateKey = attribute.Key("duplicate")
	// DeliveryKey is the delivery attempt of a message, from 1.
	DeliveryKey = attribute.Key("delivery")
	// ConsumerKey is the inbox consumer, also the deduplication scope.
	ConsumerKey = attribute.Key("consumer")
	// JobKey is the scheduled job's name.
	JobKey = attribute.Key("job")
)

// MessageAttributes are the conventional attributes of a JetStream message
// span: the system, the subject and the message id (Nats-Msg-Id).
func MessageAttributes(subject, id string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"),
		semconv.MessagingDestinationName(subject),
		semconv.MessagingMessageID(id),
	}
}
