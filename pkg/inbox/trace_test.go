package inbox_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// The headers of a message published in a span (as the relay sends it):
// the publish span 00f067aa0ba902b7 of trace 4bf9…4736, and the request id.
var tracedHeaders = map[string]string{
	"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"baggage":     "request_id=req-9",
}

// handlerSaw is what a handler found in its context.
type handlerSaw struct {
	span      trace.SpanContext
	requestID string
}

func recording(saw *[]handlerSaw, err error) inbox.Handler {
	return func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		*saw = append(*saw, handlerSaw{trace.SpanContextFromContext(ctx), logging.RequestID(ctx)})
		return err
	}
}

// TestEachDeliveryIsASpanAndADuplicateSaysSo: every delivery of a message
// is a consumer span continuing the message's trace; the handler runs in
// it, with the request id for its log lines; the second delivery of the id
// is a span of its own marked duplicate=true, and its handler never runs.
func TestEachDeliveryIsASpanAndADuplicateSaysSo(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	var saw []handlerSaw
	c := f.consumer("traced", inbox.Config{TracerProvider: rec.Provider}, recording(&saw, nil))
	msg := inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`), Headers: tracedHeaders, Delivered: 1}
	for i, want := range []inbox.Outcome{inbox.Processed, inbox.Duplicate} {
		msg.Delivered = uint64(i + 1)
		if out, err := c.Process(context.Background(), msg); out != want || err != nil {
			t.Fatalf("delivery %d: %s, %v; want %s", i+1, out, err, want)
		}
	}
	spans := spantest.Named(rec.Spans(), "process "+f.stream+".x")
	if len(spans) != 2 {
		t.Fatalf("%d delivery spans, want 2:\n%s", len(spans), spantest.List(rec.Spans()))
	}
	for i, s := range spans {
		if s.Kind != "consumer" || s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent != "00f067aa0ba902b7" {
			t.Fatalf("delivery %d: span %s does not continue the message's trace", i+1, s)
		}
		if s.Attrs["consumer"] != "traced" || s.Attrs["messaging.message.id"] != "m-1" || s.Attrs["request_id"] != "req-9" {
			t.Fatalf("delivery %d: span %s lacks the consumer, message id or request id", i+1, s)
		}
	}
	if first, second := spans[0].Attrs, spans[1].Attrs; first["duplicate"] != "false" || first["outcome"] != "processed" || first["delivery"] != "1" ||
		second["duplicate"] != "true" || second["outcome"] != "duplicate" || second["delivery"] != "2" {
		t.Fatalf("delivery attributes %v then %v, want processed on delivery 1, then duplicate=true on delivery 2", first, second)
	}
	if len(saw) != 1 || saw[0].span.SpanID().String() != spans[0].SpanID || saw[0].requestID != "req-9" {
		t.Fatalf("the handler ran %d time(s) and saw %+v; want once, in the first delivery's span, with request id req-9", len(saw), saw)
	}
}

// TestFailedDeliverySpanIsAnError: a handler error makes the delivery's
// span an error with the retry outcome.
func TestFailedDeliverySpanIsAnError(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	var saw []handlerSaw
	c := f.consumer("failing", inbox.Config{TracerProvider: rec.Provider}, recording(&saw, errors.New("not yet")))
	if out, _ := c.Process(context.Background(), inbox.Message{ID: "m-2", Subject: f.stream + ".x", Headers: tracedHeaders}); out != inbox.Retry {
		t.Fatalf("outcome %s, want retry", out)
	}
	if s := spantest.Find(t, rec.Spans(), "process "+f.stream+".x"); !s.Failed || s.Attrs["outcome"] != "retry" {
		t.Fatalf("span %s, want failed with outcome retry", s)
	}
}

// TestDeliveryWithTracingOff: a no-op provider starts nothing, even for a
// message that carries a trace: the handler's context is in no span.
func TestDeliveryWithTracingOff(t *testing.T) {
	f := newFixture(t)
	var saw []handlerSaw
	c := f.consumer("untraced", inbox.Config{TracerProvider: noop.NewTracerProvider()}, recording(&saw, nil))
	if out, err := c.Process(context.Background(), inbox.Message{ID: "m-3", Subject: f.stream + ".x", Headers: tracedHeaders}); out != inbox.Processed || err != nil {
		t.Fatalf("%s, %v", out, err)
	}
	if saw[0].span.IsValid() {
		t.Fatalf("with tracing off the handler ran in span %v", saw[0].span)
	}
}

// BenchmarkProcessTracing: one delivery (dedup row, handler, commit) per op
// of a message that carries a trace, with tracing never configured (none),
// with the no-op provider of TRACING_EXPORTER=none (off), and recording
// into a batch exporter that discards the spans (on). Off must cost what
// none costs:
//
//	cd pkg && go test -run '^$' -bench ProcessTracing -benchmem ./inbox/
func BenchmarkProcessTracing(b *testing.B) {
	on := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	db := testenv.DB(b, inbox.Migrations)
	nc := testenv.NATS(b)
	stream := testenv.UniqueName(b, "S")
	if _, err := natsjs.EnsureStream(b.Context(), nc.JS, natsjs.StreamConfig(stream, stream)); err != nil {
		b.Fatal(err)
	}
	testenv.DeleteStreamAtCleanup(b, nc.JS, stream)
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"none", nil}, {"off", noop.NewTracerProvider()}, {"on", on}} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := inbox.NewConsumer(db, nc.JS, inbox.Config{Name: tc.name, Stream: stream, TracerProvider: tc.tp},
				func(context.Context, *gorm.DB, inbox.Message) error { return nil }, testenv.Logger(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			run, n := testenv.RandomSuffix(8), 0
			for b.Loop() {
				n++
				msg := inbox.Message{ID: run + "-" + strconv.Itoa(n), Subject: stream + ".x", Body: []byte(`{}`), Headers: tracedHeaders}
				if out, err := c.Process(context.Background(), msg); out != inbox.Processed {
					b.Fatalf("%s, %v", out, err)
				}
			}
		})
	}
}
