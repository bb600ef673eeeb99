package outbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// inRequest returns a context as a traced HTTP handler has one: in a span,
// with the request id in the baggage. end ends the span.
func inRequest(rec *spantest.Recorder, id string) (ctx context.Context, end func()) {
	ctx, span := rec.Provider.Tracer("test").Start(context.Background(), "request")
	return tracing.WithRequestID(ctx, id), func() { span.End() }
}

// addIn commits msg through a transaction on ctx, as the stores do
// (db.WithContext(ctx)), and returns its id.
func (f *fixture) addIn(ctx context.Context, msg outbox.Message) string {
	f.t.Helper()
	msgs := []outbox.Message{msg}
	testenv.Must(f.t, f.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }))
	return msgs[0].ID
}

// storedHeaders reads the headers column of the row of message id.
func (f *fixture) storedHeaders(id string) map[string]string {
	f.t.Helper()
	var raw *string
	testenv.Must(f.t, f.db.Raw("SELECT headers FROM local_message WHERE message_no = ?", id).Row().Scan(&raw))
	if raw == nil {
		return nil
	}
	var h map[string]string
	testenv.Must(f.t, json.Unmarshal([]byte(*raw), &h))
	return h
}

// lastMessage returns the headers of the last message on the fixture's
// subject.
func (f *fixture) lastMessage() nats.Header {
	f.t.Helper()
	s, err := f.nc.JS.Stream(context.Background(), f.stream)
	testenv.Must(f.t, err)
	m, err := s.GetLastMsgForSubject(context.Background(), f.subject())
	testenv.Must(f.t, err)
	return m.Header
}

// TestAddStoresTheTraceOfItsTransaction: a row written in a traced
// context holds its traceparent and the request id, beside the caller's
// own headers, and a header the caller set keeps the caller's value.
func TestAddStoresTheTraceOfItsTransaction(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	ctx, end := inRequest(rec, "req-1")
	sc := trace.SpanContextFromContext(ctx)

	h := f.storedHeaders(f.addIn(ctx, outbox.Message{Subject: f.subject(), Body: []byte(`{}`), Headers: map[string]string{"X-Test": "1"}}))
	if !strings.Contains(h["traceparent"], sc.TraceID().String()+"-"+sc.SpanID().String()) || !strings.Contains(h["baggage"], "request_id=req-1") || h["X-Test"] != "1" {
		t.Fatalf("stored headers %v, want the request's traceparent, request_id=req-1 in the baggage, and X-Test", h)
	}
	own := "00-11111111111111111111111111111111-2222222222222222-01"
	if h := f.storedHeaders(f.addIn(ctx, outbox.Message{Subject: f.subject(), Headers: map[string]string{"traceparent": own}})); h["traceparent"] != own {
		t.Fatalf("stored traceparent %q, want the caller's %q", h["traceparent"], own)
	}
	end()

	if h := f.storedHeaders(f.addIn(context.Background(), outbox.Message{Subject: f.subject()})); h != nil {
		t.Fatalf("a row written in no trace has headers %v, want none", h)
	}
	if h := f.storedHeaders(f.addIn(context.Background(), outbox.Message{Subject: f.subject(), Headers: map[string]string{"X-Test": "2"}})); len(h) != 1 {
		t.Fatalf("a row written in no trace has headers %v, want only the caller's", h)
	}
}

// TestRelayPublishesInAChildOfTheRowsTrace: the publish is a producer span
// under the span the row was written in, and the message carries the
// publish span, for the consumer to continue, with the request id.
func TestRelayPublishesInAChildOfTheRowsTrace(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	ctx, end := inRequest(rec, "req-2")
	id := f.addIn(ctx, outbox.Message{Subject: f.subject(), Body: []byte(`{}`)})
	end()

	r := f.relay(f.nc.JS, outbox.Config{TracerProvider: rec.Provider})
	if n, err := r.PublishBatch(context.Background()); err != nil || n != 1 {
		t.Fatalf("PublishBatch = %d, %v", n, err)
	}
	spans := rec.Spans()
	publish := spantest.Find(t, spans, "publish "+f.subject())
	spantest.ChildOf(t, publish, spantest.Find(t, spans, "request"))
	if publish.Kind != "producer" || publish.Attrs["messaging.message.id"] != id || publish.Attrs["messaging.destination.name"] != f.subject() || publish.Failed {
		t.Fatalf("publish span %s, want a successful producer span naming message %s", publish, id)
	}
	h := f.lastMessage()
	if tp := h.Get("traceparent"); !strings.Contains(tp, publish.TraceID+"-"+publish.SpanID) {
		t.Fatalf("the message carries traceparent %q, want the publish span %s", tp, publish)
	}
	if b := h.Get("baggage"); !strings.Contains(b, "request_id=req-2") {
		t.Fatalf("the message carries baggage %q, want the request id", b)
	}
}

// TestSendPublishesInAChildOfTheRowsTrace: Add writes the trace of its
// transaction into the messages as into their rows, so a message handed to
// Send is published in a producer span under the request's, as the claim
// path publishes it, and the message carries that span.
func TestSendPublishesInAChildOfTheRowsTrace(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	r := f.relay(f.nc.JS, outbox.Config{TracerProvider: rec.Provider, Handoff: 5 * time.Minute})
	runAlone(t, r)
	ctx, end := inRequest(rec, "req-4")
	msgs := []outbox.Message{{Subject: f.subject(), Body: []byte(`{}`), Headers: map[string]string{"X-Test": "1"}}}
	testenv.Must(t, f.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }))
	end()
	if msgs[0].Headers["traceparent"] == "" || msgs[0].Headers["X-Test"] != "1" {
		t.Fatalf("Add left the message with headers %v, want its row's: the trace and X-Test", msgs[0].Headers)
	}
	r.Send(msgs...)
	testenv.WaitFor(t, 10*time.Second, "the row sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == 1
	})
	spans := rec.Spans()
	publish := spantest.Find(t, spans, "publish "+f.subject())
	spantest.ChildOf(t, publish, spantest.Find(t, spans, "request"))
	if publish.Kind != "producer" || publish.Attrs["messaging.message.id"] != msgs[0].ID || publish.Failed {
		t.Fatalf("publish span %s, want a successful producer span naming message %s", publish, msgs[0].ID)
	}
	h := f.lastMessage()
	if tp := h.Get("traceparent"); !strings.Contains(tp, publish.TraceID+"-"+publish.SpanID) || !strings.Contains(h.Get("baggage"), "request_id=req-4") || h.Get("X-Test") != "1" {
		t.Fatalf("the message carries %v, want the publish span %s, the request id and X-Test", h, publish)
	}
}

// TestRepublishIsASpanOfItsOwnMarkedDuplicate: a row published again after
// a crash between the PubAck and the mark-sent (inside the stream's
// duplicate window) is a second publish span under the same parent, marked
// duplicate because JetStream dropped it.
func TestRepublishIsASpanOfItsOwnMarkedDuplicate(t *testing.T) {
	f := newFixture(t)
	rec := spantest.NewRecorder(t)
	ctx, end := inRequest(rec, "req-3")
	id := f.addIn(ctx, outbox.Message{Subject: f.subject(), Body: []byte(`{}`)})
	end()

	cfg := shortLease
	cfg.TracerProvider = rec.Provider
	crashing := f.relay(f.nc.JS, cfg)
	outbox.SetAfterPublish(crashing, func(context.Context, []string) error {
		return context.Canceled // the process died before settling the row
	})
	if _, err := crashing.PublishBatch(context.Background()); err == nil {
		t.Fatal("the crashing batch succeeded")
	}
	next := f.relay(f.nc.JS, cfg)
	testenv.WaitFor(t, 10*time.Second, "the republish after the lease", func() bool {
		n, err := next.PublishBatch(context.Background())
		testenv.Must(t, err)
		return n == 1
	})
	spans := rec.Spans()
	publishes := spantest.Named(spans, "publish "+f.subject())
	if len(publishes) != 2 {
		t.Fatalf("%d publish spans, want 2:\n%s", len(publishes), spantest.List(spans))
	}
	request := spantest.Find(t, spans, "request")
	for _, p := range publishes {
		spantest.ChildOf(t, p, request)
	}
	if publishes[0].Attrs["duplicate"] == "true" || publishes[1].Attrs["duplicate"] != "true" {
		t.Fatalf("publish spans %v, want only the second marked duplicate", publishes)
	}
	if n := f.count("SELECT COUNT(*) FROM local_message WHERE message_no = ? AND status = 'sent'", id); n != 1 {
		t.Fatalf("the row is not sent after the republish")
	}
}

// TestRelayWithTracingOffAddsNothing: with the no-op provider the message
// carries the row's headers and the message id, nothing else.
func TestRelayWithTracingOffAddsNothing(t *testing.T) {
	f := newFixture(t)
	f.addIn(context.Background(), outbox.Message{Subject: f.subject(), Body: []byte(`{}`), Headers: map[string]string{"X-Test": "1"}})
	r := f.relay(f.nc.JS, outbox.Config{TracerProvider: noop.NewTracerProvider()})
	if _, err := r.PublishBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := f.lastMessage()
	if len(h) != 2 || h.Get("X-Test") != "1" || h.Get("Nats-Msg-Id") == "" {
		t.Fatalf("message headers %v, want X-Test and Nats-Msg-Id only", h)
	}
}
