package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// dupWindow is the test stream's duplicate window, short so that a
// republish can get past it within the test, as a redrive hours later
// does in production.
const dupWindow = 300 * time.Millisecond

// pipeline is one service's path of an event, built from the real parts on
// the real MariaDB and NATS: an HTTP route that writes a row and its event
// in one transaction, the relay, and an inbox consumer of the event.
type pipeline struct {
	db      *gorm.DB
	handler http.Handler
	relay   *outbox.Relay
	subject string
}

func newPipeline(t *testing.T, rec *spantest.Recorder) *pipeline {
	t.Helper()
	db := testenv.DB(t, outbox.Migrations, inbox.Migrations)
	testenv.Must(t, db.Exec("CREATE TABLE made (id VARCHAR(32) PRIMARY KEY) ENGINE=InnoDB").Error)
	testenv.Must(t, db.Exec("CREATE TABLE effect (message_id VARCHAR(128) PRIMARY KEY) ENGINE=InnoDB").Error)
	nc := testenv.NATS(t)
	stream := testenv.UniqueName(t, "S")
	sc := natsjs.StreamConfig(stream, stream)
	sc.Duplicates = dupWindow
	_, err := natsjs.EnsureStream(context.Background(), nc.JS, sc)
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, nc.JS, stream)
	p := &pipeline{db: db, subject: stream + ".made"}
	log := testenv.Logger(t)

	p.relay, err = outbox.NewRelay(db, nc.JS, outbox.Config{TracerProvider: rec.Provider}, log, nil)
	testenv.Must(t, err)
	consumer, err := inbox.NewConsumer(db, nc.JS, inbox.Config{Name: "made", Stream: stream, FilterSubjects: []string{p.subject}, TracerProvider: rec.Provider},
		func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			return tx.Exec("INSERT INTO effect (message_id) VALUES (?)", msg.ID).Error
		}, log, nil)
	testenv.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.relay.Run(ctx) })
	wg.Go(func() { _ = consumer.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	srv, err := httpserver.New(httpserver.Options{
		Addr: "127.0.0.1:0", Config: httpserver.Config{BodyLimitBytes: 1 << 10},
		Logger: log, Registry: prometheus.NewRegistry(), TracerProvider: rec.Provider,
	})
	testenv.Must(t, err)
	srv.Engine().POST("/things/:id", func(c *gin.Context) {
		err := db.WithContext(c.Request.Context()).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO made (id) VALUES (?)", c.Param("id")).Error; err != nil {
				return err
			}
			return outbox.Add(tx, outbox.Message{ID: "made-" + c.Param("id"), Subject: p.subject, Body: []byte(`{}`)})
		})
		if err != nil {
			c.String(http.StatusInternalServerError, err.Error())
			return
		}
		p.relay.Wake()
		c.Status(http.StatusCreated)
	})
	p.handler = srv.Handler()
	return p
}

func (p *pipeline) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	var n int64
	testenv.Must(t, p.db.Raw(q, args...).Row().Scan(&n))
	return n
}

// TestOneTraceFromRequestToConsumer follows one event end to end: the HTTP
// request's span is the root, the relay's publish its child, the
// consumer's delivery the publish's child, one trace id throughout, the
// request id carried to the consumer. Then the row is published again, as
// a relay that died between the PubAck and the mark-sent would once the
// stream's duplicate window has passed: JetStream stores it a second time
// and delivers it, and the inbox absorbs it. That republish and its
// delivery are spans of their own in the same trace, the delivery marked
// duplicate=true, and there is still one effect.
func TestOneTraceFromRequestToConsumer(t *testing.T) {
	rec := spantest.NewRecorder(t)
	p := newPipeline(t, rec)
	process := "process " + p.subject
	publish := "publish " + p.subject

	req := httptest.NewRequest(http.MethodPost, "/things/1", nil)
	req.Header.Set(httpserver.RequestIDHeader, "req-e2e")
	w := httptest.NewRecorder()
	p.handler.ServeHTTP(w, req)
	if w.Code != http.StatusCreated {
		t.Fatalf("POST /things/1 = %d %s", w.Code, w.Body)
	}
	testenv.WaitFor(t, time.Minute, "the consumer's span", func() bool { return len(spantest.Named(rec.Spans(), process)) == 1 })

	spans := rec.Spans()
	request := spantest.Find(t, spans, "POST /things/:id")
	firstPublish := spantest.Find(t, spans, publish)
	firstDelivery := spantest.Find(t, spans, process)
	spantest.ChildOf(t, firstPublish, request)
	spantest.ChildOf(t, firstDelivery, firstPublish)
	if request.Parent != "" || request.Attrs["request_id"] != "req-e2e" {
		t.Fatalf("request span %s, want a root span with request_id req-e2e", request)
	}
	if firstDelivery.Attrs["request_id"] != "req-e2e" || firstDelivery.Attrs["duplicate"] != "false" || firstDelivery.Attrs["messaging.message.id"] != "made-1" {
		t.Fatalf("first delivery %s, want message made-1 with the request id, not a duplicate", firstDelivery)
	}

	time.Sleep(2 * dupWindow)
	res := p.db.Exec("UPDATE local_message SET status = 'pending', sent_at = NULL, next_retry_time = ? WHERE message_no = 'made-1' AND status = 'sent'", time.Now())
	if res.Error != nil || res.RowsAffected != 1 {
		t.Fatalf("put the row back to pending: %v, %d rows", res.Error, res.RowsAffected)
	}
	p.relay.Wake()
	testenv.WaitFor(t, time.Minute, "the second delivery's span", func() bool { return len(spantest.Named(rec.Spans(), process)) == 2 })

	spans = rec.Spans()
	publishes, deliveries := spantest.Named(spans, publish), spantest.Named(spans, process)
	if len(publishes) != 2 {
		t.Fatalf("%d publish spans, want 2:\n%s", len(publishes), spantest.List(spans))
	}
	spantest.ChildOf(t, publishes[1], request)
	spantest.ChildOf(t, deliveries[1], publishes[1])
	if d := deliveries[1].Attrs; d["duplicate"] != "true" || d["outcome"] != "duplicate" || d["request_id"] != "req-e2e" {
		t.Fatalf("the republished delivery %s, want duplicate=true with the request id", deliveries[1])
	}
	if publishes[1].Attrs["duplicate"] == "true" {
		t.Fatalf("the republish %s was dropped by the stream; the test needs it past the duplicate window", publishes[1])
	}
	if n := p.count(t, "SELECT COUNT(*) FROM effect"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	for _, s := range spans {
		if s.TraceID != request.TraceID {
			t.Fatalf("span %s is outside the request's trace", s)
		}
	}
}
