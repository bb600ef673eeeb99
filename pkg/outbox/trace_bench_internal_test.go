package outbox

import (
	"context"
	"io"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// The outbox path with tracing never configured (none: the code as it was,
// which never looks at the context), with the no-op provider that
// TRACING_EXPORTER=none gives (off), and recording into a batch exporter
// that discards the spans (on). Off must cost what none costs:
//
//	cd pkg && go test -run '^$' -bench 'AddTracing|PublishTracing' -benchmem ./outbox/

var traceBenchBody = []byte(`{"order_no":"O20260101000000000deadbeef","user_id":42,"amount":129900}`)

// benchContexts returns the context a use case writes its rows in, per case:
// a handler's with the request id for the logger, and with tracing on also
// in a span with the request id in the baggage.
func benchContexts(b *testing.B) (map[string]context.Context, trace.TracerProvider) {
	on := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	handler := logging.WithRequestID(context.Background(), "bench-request-id")
	traced, span := on.Tracer("bench").Start(handler, "POST /orders")
	b.Cleanup(func() { span.End() })
	return map[string]context.Context{"none": handler, "off": handler, "on": tracing.WithRequestID(traced, "bench-request-id")}, on
}

// BenchmarkAddTracing: one Add of one message (one INSERT) per op, inside
// one open transaction.
func BenchmarkAddTracing(b *testing.B) {
	db := testenv.DB(b, Migrations)
	ctxs, _ := benchContexts(b)
	for _, name := range []string{"none", "off", "on"} {
		b.Run(name, func(b *testing.B) {
			tx := db.WithContext(ctxs[name]).Begin()
			defer tx.Rollback()
			b.ReportAllocs()
			for b.Loop() {
				msgs := []Message{{Subject: "bench.x", Body: traceBenchBody}}
				var err error
				if name == "none" {
					err = insert(tx, nil, msgs)
				} else {
					err = Add(tx, msgs...)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublishTracing: one PublishBatch of 100 rows per op (claim,
// publish, PubAcks, mark sent, commit); the rows are written before each op
// in the context of the case, so that with tracing on they carry a trace.
func BenchmarkPublishTracing(b *testing.B) {
	const rows = 100
	db := testenv.DB(b, Migrations)
	nc := testenv.NATS(b)
	stream := testenv.UniqueName(b, "S")
	if _, err := natsjs.EnsureStream(b.Context(), nc.JS, natsjs.StreamConfig(stream, stream)); err != nil {
		b.Fatal(err)
	}
	testenv.DeleteStreamAtCleanup(b, nc.JS, stream)
	ctxs, on := benchContexts(b)
	providers := map[string]trace.TracerProvider{"none": nil, "off": noop.NewTracerProvider(), "on": on}
	for _, name := range []string{"none", "off", "on"} {
		b.Run(name, func(b *testing.B) {
			r, err := NewRelay(db, nc.JS, Config{BatchSize: rows, TracerProvider: providers[name]}, slog.New(slog.NewJSONHandler(io.Discard, nil)), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				msgs := make([]Message, rows)
				for i := range msgs {
					msgs[i] = Message{Subject: stream + ".x", Body: traceBenchBody}
				}
				if err := db.WithContext(ctxs[name]).Transaction(func(tx *gorm.DB) error { return Add(tx, msgs...) }); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if n, err := r.PublishBatch(context.Background()); err != nil || n != rows {
					b.Fatalf("PublishBatch = %d, %v", n, err)
				}
			}
		})
	}
}
