package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// Orders committed while no relay runs (a crash after commit, before
// publish) are all published exactly once when a relay starts.
func TestCommittedWhileRelayDownPublishedOnceLater(t *testing.T) {
	f := newFixture(t)
	ids := f.addMessages(300, 7)
	if got := f.streamMsgs(); got != 0 {
		t.Fatalf("nothing may be published inside Add; stream has %d", got)
	}
	run(t, f.relay(f.nc.JS, outbox.Config{BatchSize: 50}))
	testenv.WaitFor(t, 20*time.Second, "all rows sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == int64(len(ids))
	})
	got := f.streamIDs()
	if len(got) != len(ids) {
		t.Fatalf("stream holds %d distinct ids, want %d", len(got), len(ids))
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Fatalf("id %s in stream %d times, want 1", id, got[id])
		}
	}
}

// shortLease is a relay configuration whose claim lease ends in a second,
// so a test can see what happens after it without waiting half a minute.
var shortLease = outbox.Config{BatchSize: 100, Workers: 1, PublishTimeout: 400 * time.Millisecond, ClaimLease: time.Second}

// A relay that dies after the PubAcks but before settling leaves its rows
// pending and leased to it: no other relay republishes them before the lease
// ends, and after it the next relay does, JetStream drops the copies
// (PubAck.Duplicate) and the consumer's effect count stays 1 each.
func TestCrashAfterPublishBeforeMarkSent(t *testing.T) {
	f := newFixture(t)
	f.consume("c1")
	ids := f.addMessages(100, 10)
	var crashed atomic.Int64
	crashing := f.relay(f.nc.JS, shortLease)
	outbox.SetAfterPublish(crashing, func(_ context.Context, ids []string) error {
		crashed.Add(int64(len(ids)))
		return errors.New("injected crash between publish and settle")
	})
	n, err := crashing.PublishBatch(context.Background())
	if err == nil || n != 100 || crashed.Load() != 100 {
		t.Fatalf("crashing batch: n=%d err=%v crashed=%d", n, err, crashed.Load())
	}
	if p := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'pending'"); p != 100 {
		t.Fatalf("after the crash %d rows pending, want 100", p)
	}
	if got := f.streamMsgs(); got != 100 {
		t.Fatalf("stream has %d messages after the first publish, want 100", got)
	}

	reg := newRegistry()
	cfg := shortLease
	healthy, err := outbox.NewRelay(f.db, f.nc.JS, cfg, testenv.Logger(t), reg)
	testenv.Must(t, err)
	if n, err := healthy.PublishBatch(context.Background()); err != nil || n != 0 {
		t.Fatalf("a relay claimed %d rows (err %v) under the dead relay's lease, want 0", n, err)
	}
	testenv.WaitFor(t, 10*time.Second, "the lease to end and the rows to be republished", func() bool {
		n, err := healthy.PublishBatch(context.Background())
		testenv.Must(t, err)
		return n == 100
	})
	if s := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'"); s != 100 {
		t.Fatalf("%d rows sent after the republish, want 100", s)
	}
	if got := f.streamMsgs(); got != 100 {
		t.Fatalf("stream has %d messages after the republish, want 100 (duplicates dropped)", got)
	}
	if d := metricValue(t, reg, "outbox_publish_duplicates_total"); d != 100 {
		t.Fatalf("PubAck.Duplicate seen %v times, want 100", d)
	}
	testenv.WaitFor(t, 20*time.Second, "100 effects", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= 100 })
	time.Sleep(200 * time.Millisecond)
	for _, id := range ids {
		if c := f.count("SELECT COUNT(*) FROM effect WHERE message_id = ?", id); c != 1 {
			t.Fatalf("message %s had %d effects, want 1", id, c)
		}
	}
}

// TestNoTransactionIsOpenWhilePublishing: while a batch is on the wire its
// rows are leased, not locked. Another transaction can lock them at once
// (NOWAIT), so a slow NATS never holds database locks or a pooled
// connection in a transaction.
func TestNoTransactionIsOpenWhilePublishing(t *testing.T) {
	f := newFixture(t)
	f.addMessages(20, 20)
	r := f.relay(f.nc.JS, outbox.Config{BatchSize: 20, Workers: 1})
	var checked bool
	outbox.SetAfterPublish(r, func(ctx context.Context, _ []string) error {
		checked = true
		return f.db.Transaction(func(tx *gorm.DB) error {
			var n int
			return tx.Raw("SELECT COUNT(*) FROM (SELECT id FROM local_message WHERE status = 'pending' FOR UPDATE NOWAIT) locked").Row().Scan(&n)
		})
	})
	if n, err := r.PublishBatch(context.Background()); err != nil || n != 20 || !checked {
		t.Fatalf("PublishBatch = %d, %v (checked %v): the claimed rows were locked while the batch was published", n, err, checked)
	}
	if s := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent' AND claim_token IS NULL"); s != 20 {
		t.Fatalf("%d rows sent and released, want 20", s)
	}
}

// TestAStaleRelayCannotOverwriteTheNextClaim: a relay stalls past its lease
// with a batch in flight; another relay claims, publishes and settles the
// rows; when the stale relay finally goes on, it changes nothing: its batch
// is bounded by its lease, and a settle that still ran would match no row,
// the rows no longer carrying its batch's token.
func TestAStaleRelayCannotOverwriteTheNextClaim(t *testing.T) {
	f := newFixture(t)
	f.addMessages(10, 10)
	stale := f.relay(f.nc.JS, shortLease)
	resume := make(chan struct{})
	stalled := make(chan struct{})
	outbox.SetAfterPublish(stale, func(context.Context, []string) error {
		close(stalled)
		<-resume
		return nil
	})
	done := make(chan error, 1)
	go func() { _, err := stale.PublishBatch(context.Background()); done <- err }()
	<-stalled

	next := f.relay(f.nc.JS, shortLease)
	testenv.WaitFor(t, 10*time.Second, "the next relay to claim the rows after the lease", func() bool {
		n, err := next.PublishBatch(context.Background())
		testenv.Must(t, err)
		return n == 10
	})
	testenv.Must(t, f.db.Exec("UPDATE local_message SET status = 'failed' WHERE status = 'sent'").Error) // a later state the stale relay must not undo
	close(resume)
	if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stale relay: %v, want nil or its lease's deadline", err)
	}
	if n := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'failed'"); n != 10 {
		t.Fatalf("%d rows kept the later state, want 10: the stale relay overwrote them", n)
	}
}

// Three relays over one table while producers keep committing: every event
// published once, none lost, exactly one consumer effect each.
func TestThreeRelaysTenThousandEvents(t *testing.T) {
	const total = 10000
	f := newFixture(t)
	f.consume("c3")
	var relays []*outbox.Relay
	for range 3 {
		r := f.relay(f.nc.JS, outbox.Config{BatchSize: 200})
		relays = append(relays, r)
		run(t, r)
	}
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := 0; i < total/4; i += 50 {
				_ = f.addMessages(50, 50)
				relays[(p+i)%3].Wake()
			}
		})
	}
	wg.Wait()
	testenv.WaitFor(t, 2*time.Minute, "all sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == total
	})
	if got := f.streamMsgs(); got != total {
		t.Fatalf("stream has %d messages, want %d", got, total)
	}
	testenv.WaitFor(t, 2*time.Minute, "all effects", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= total })
	time.Sleep(300 * time.Millisecond)
	if e := f.count("SELECT COUNT(*) FROM effect"); e != total {
		t.Fatalf("%d effects, want %d", e, total)
	}
	if d := f.count("SELECT COUNT(*) FROM (SELECT message_id FROM effect GROUP BY message_id HAVING COUNT(*) > 1) d"); d != 0 {
		t.Fatalf("%d messages had more than one effect", d)
	}
}

// outage starts a private nats-server with a stream for f's subjects,
// connects to it, stops it and waits until the client has noticed, so the
// relay sees NATS unreachable from its first attempt. It returns the
// connection and the stream name; srv.Start ends the outage.
func (f *fixture) outage(t *testing.T) (*testenv.NATSServer, *natsjs.Conn, string) {
	srv := testenv.NewNATSServer(t, "-js", "-sd", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := natsjs.Connect(ctx, natsjs.Config{URL: srv.URL()}, "outbox-test", testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(conn.NC.Close)
	stream := "OUTAGE"
	_, err = natsjs.EnsureStream(ctx, conn.JS, natsjs.StreamConfig(stream, f.prefix))
	testenv.Must(t, err)
	srv.Stop()
	testenv.WaitFor(t, 5*time.Second, "client notices the outage", func() bool { return !conn.NC.IsConnected() })
	return srv, conn, stream
}

// drainedInto waits until every row is sent after the outage and checks
// that stream holds exactly want messages.
func (f *fixture) drainedInto(t *testing.T, conn *natsjs.Conn, stream string, want uint64) {
	testenv.WaitFor(t, 20*time.Second, "backlog drained", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status <> 'sent'") == 0
	})
	s, err := conn.JS.Stream(context.Background(), stream)
	testenv.Must(t, err)
	info, err := s.Info(context.Background())
	testenv.Must(t, err)
	if info.State.Msgs != want {
		t.Fatalf("stream has %d messages after the outage, want %d", info.State.Msgs, want)
	}
}

// asCommitted selects the rows no relay has touched since Add: pending,
// no retry spent, no error, no delay added.
const asCommitted = "SELECT COUNT(*) FROM local_message WHERE status = 'pending' AND retry_count = 0 AND last_error IS NULL AND updated_at = created_at AND next_retry_time = created_at"

// While NATS is unreachable the relay claims nothing: the rows stay exactly
// as committed, each poll counted in outbox_outage_skips_total; when NATS
// returns the backlog drains at the next polls, not after a delay grown
// during the outage. The outage is logged once as it begins, not per poll.
// (Claiming them, every poll wrote every row back with a longer delay, up
// to MaxBackoff.)
func TestNATSUnreachableTouchesNoRowThenDrainsPromptly(t *testing.T) {
	f := newFixture(t)
	srv, conn, stream := f.outage(t)
	reg := newRegistry()
	logs := &testenv.SyncBuffer{}
	r, err := outbox.NewRelay(f.db, conn.JS, outbox.Config{BatchSize: 100, BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Minute, PublishTimeout: 500 * time.Millisecond}, slog.New(slog.NewTextHandler(logs, nil)), reg)
	testenv.Must(t, err)
	stop := run(t, r)
	f.addMessages(200, 20)
	time.Sleep(1500 * time.Millisecond)

	if n := f.count(asCommitted); n != 200 {
		t.Fatalf("during the outage %d of 200 rows are as committed, want all: an outage touches no row", n)
	}
	// Woken every 50ms for 1.5s, two workers pause about 60 times.
	if v := metricValue(t, reg, "outbox_outage_skips_total"); v < 10 {
		t.Fatalf("outbox_outage_skips_total = %v, want every poll of the outage counted", v)
	}
	if v := metricValue(t, reg, "outbox_outage_deferrals_total"); v != 0 {
		t.Fatalf("outbox_outage_deferrals_total = %v, want 0: nothing was claimed", v)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "outbox relay paused") {
		t.Fatalf("%d warnings during the outage, want the one that it began:\n%s", n, logs.String())
	}

	srv.Start()
	back := time.Now()
	f.drainedInto(t, conn, stream, 200)
	if d := time.Since(back); d > 3*time.Second {
		t.Fatalf("the backlog drained %s after NATS returned, want within a few polls", d)
	}
	stop()
	if !strings.Contains(logs.String(), "outbox relay resumes publishing") {
		t.Fatalf("the end of the outage was not logged:\n%s", logs.String())
	}
}

// An outage longer than the whole retry span turns no row failed and
// spends no retry: the relay pauses, and the backlog drains by itself when
// NATS returns, without a redrive. (Counting failed publishes as retries,
// every row was failed after MaxRetries quick attempts.)
func TestOutageLongerThanRetrySpanDrainsWithoutRedrive(t *testing.T) {
	f := newFixture(t)
	srv, conn, stream := f.outage(t)
	reg := newRegistry()
	r, err := outbox.NewRelay(f.db, conn.JS, outbox.Config{BatchSize: 100, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 2, PublishTimeout: 200 * time.Millisecond}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	stop := run(t, r)
	f.addMessages(50, 10)
	span := r.Config().RetrySpan()
	time.Sleep(4 * span)

	if n := f.count(asCommitted); n != 50 {
		t.Fatalf("after an outage of 4× the retry span (%s) %d of 50 rows are as committed, want all", span, n)
	}

	srv.Start()
	f.drainedInto(t, conn, stream, 50)
	stop()
	for name, want := range map[string]float64{"outbox_failed_total": 0, "outbox_publish_retries_total": 0, "outbox_outage_deferrals_total": 0, "outbox_redriven_total": 0, "outbox_published_total": 50} {
		if v := metricValue(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// cutJS is a JetStream context whose connection is cut after the first keep
// publishes: the later ones fail as on a connection that closed in the
// middle of a batch, after the relay found it connected.
type cutJS struct {
	jetstream.JetStream
	keep, n atomic.Int64
}

func (j *cutJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if j.n.Add(1) > j.keep.Load() {
		return nil, fmt.Errorf("publish: %w", nats.ErrConnectionClosed)
	}
	return j.JetStream.PublishMsgAsync(m, opts...)
}

// The rows whose publish a connection drop cut off in the middle of a batch
// are deferred without spending a retry (with MaxRetries 1 a spent one
// would fail them), for a short delay only; the next batch publishes them.
func TestConnectionLostMidBatchDefersWithoutSpendingRetries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.addMessages(10, 10)
	js := &cutJS{JetStream: f.nc.JS}
	js.keep.Store(4)
	reg := newRegistry()
	r, err := outbox.NewRelay(f.db, js, outbox.Config{BaseBackoff: 200 * time.Millisecond, MaxRetries: 1}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	if n, err := r.PublishBatch(ctx); err != nil || n != 10 {
		t.Fatalf("batch: claimed %d, err %v", n, err)
	}
	if s := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'"); s != 4 {
		t.Fatalf("%d rows sent before the drop, want 4", s)
	}
	// The delay is the first backoff, 100..200ms, not one grown by the drop.
	if d := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'pending' AND retry_count = 0 AND last_error LIKE '%connection closed%' AND TIMESTAMPDIFF(MICROSECOND, updated_at, next_retry_time) BETWEEN 100000 AND 200000"); d != 6 {
		t.Fatalf("%d of the 6 cut-off rows deferred with their retries and a first-backoff delay", d)
	}
	for name, want := range map[string]float64{"outbox_published_total": 4, "outbox_outage_deferrals_total": 6, "outbox_publish_retries_total": 0, "outbox_failed_total": 0} {
		if v := metricValue(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	js.keep.Store(1 << 40) // reconnected
	time.Sleep(250 * time.Millisecond)
	if n, err := r.PublishBatch(ctx); err != nil || n != 6 {
		t.Fatalf("batch after the drop: claimed %d, err %v", n, err)
	}
	if got := f.streamMsgs(); got != 10 {
		t.Fatalf("stream has %d messages, want 10", got)
	}
}

// A message whose publish always fails (its stream refuses it: larger than
// the stream's MaxMsgSize) becomes failed after MaxRetries, counted; the
// admin redrive publishes it once the cause is fixed.
func TestFailedAfterMaxRetriesThenRedrive(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	strict := "strict" + strings.ToLower(testenv.RandomSuffix(8))
	sc := natsjs.StreamConfig(strict, strict)
	sc.MaxMsgSize = 16
	_, err := natsjs.EnsureStream(ctx, f.nc.JS, sc)
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, f.nc.JS, strict)
	msg := outbox.Message{ID: "big-" + testenv.RandomSuffix(12), Subject: strict + ".x", Body: []byte(`{"larger":"than sixteen bytes"}`)}
	testenv.Must(t, f.db.Transaction(func(tx *gormDB) error { return outbox.Add(tx, msg) }))
	id := f.count("SELECT id FROM local_message")

	reg := newRegistry()
	r, err := outbox.NewRelay(f.db, f.nc.JS, outbox.Config{BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxRetries: 3, PublishTimeout: time.Second}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	for i := 0; i < 3; i++ {
		time.Sleep(5 * time.Millisecond) // let the backoff expire
		if _, err := r.PublishBatch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	var retries int
	testenv.Must(t, f.db.Raw("SELECT status, retry_count FROM local_message WHERE id = ?", id).Row().Scan(&status, &retries))
	if status != outbox.StatusFailed || retries != 3 {
		t.Fatalf("after 3 failed publishes: status %s retries %d, want failed 3", status, retries)
	}
	if v := metricValue(t, reg, "outbox_failed_total"); v != 1 {
		t.Fatalf("outbox_failed_total = %v, want 1", v)
	}
	if v := metricValue(t, reg, "outbox_publish_retries_total"); v != 2 {
		t.Fatalf("outbox_publish_retries_total = %v, want 2", v)
	}
	if v := metricValue(t, reg, "outbox_outage_deferrals_total"); v != 0 {
		t.Fatalf("outbox_outage_deferrals_total = %v, want 0: the stream answered", v)
	}
	// Failed rows are not claimed again by themselves.
	if n, _ := r.PublishBatch(ctx); n != 0 {
		t.Fatalf("a failed row was claimed again (%d)", n)
	}

	// Fix the cause: the stream takes larger messages.
	sc.MaxMsgSize = -1
	_, err = natsjs.EnsureStream(ctx, f.nc.JS, sc)
	testenv.Must(t, err)

	gin.SetMode(gin.TestMode)
	e := gin.New()
	r.MountRedrive(e, "secret")
	req := httptest.NewRequest(http.MethodPost, "/admin/outbox/redrive", strings.NewReader(`{"message_ids":["`+msg.ID+`"]}`))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("redrive without the admin token: %d, want 401", rec.Code)
	}
	req = httptest.NewRequest(http.MethodPost, "/admin/outbox/redrive", strings.NewReader(`{"message_ids":["`+msg.ID+`"]}`))
	req.Header.Set("Authorization", "Bearer secret")
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"redriven":1`) {
		t.Fatalf("redrive: %d %s", rec.Code, rec.Body.String())
	}
	if n, err := r.PublishBatch(ctx); err != nil || n != 1 {
		t.Fatalf("after redrive: claimed %d, err %v", n, err)
	}
	testenv.Must(t, f.db.Raw("SELECT status FROM local_message WHERE id = ?", id).Row().Scan(&status))
	if status != outbox.StatusSent {
		t.Fatalf("after redrive status %s, want sent", status)
	}
	s, err := f.nc.JS.Stream(ctx, strict)
	testenv.Must(t, err)
	info, err := s.Info(ctx)
	testenv.Must(t, err)
	if info.State.Msgs != 1 {
		t.Fatalf("redriven stream has %d messages, want 1", info.State.Msgs)
	}
}

// A row whose subject no stream captures (a wrong prefix, a missing stream:
// a configuration error) gets no responders as in an outage, but JetStream
// answers that no stream captures it: the row spends its retries and ends
// failed after MaxRetries, counted and logged as such, instead of waiting
// forever as "NATS unreachable"; a redrive publishes it once the stream
// exists.
func TestSubjectWithoutStreamFailsAfterMaxRetriesThenRedrive(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	missing := "missing" + strings.ToLower(testenv.RandomSuffix(8))
	msg := outbox.Message{ID: "lost-" + testenv.RandomSuffix(12), Subject: missing + ".x", Body: []byte(`{}`)}
	testenv.Must(t, f.db.Transaction(func(tx *gormDB) error { return outbox.Add(tx, msg) }))

	reg := newRegistry()
	r, err := outbox.NewRelay(f.db, f.nc.JS, outbox.Config{BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxRetries: 3, PublishTimeout: 2 * time.Second}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	for range 3 {
		time.Sleep(5 * time.Millisecond) // let the backoff expire
		if n, err := r.PublishBatch(ctx); err != nil || n != 1 {
			t.Fatalf("publish batch: claimed %d, err %v", n, err)
		}
	}
	var status, lastErr string
	var retries int
	testenv.Must(t, f.db.Raw("SELECT status, retry_count, last_error FROM local_message WHERE message_no = ?", msg.ID).Row().Scan(&status, &retries, &lastErr))
	if status != outbox.StatusFailed || retries != 3 || !strings.Contains(lastErr, "no stream captures subject "+msg.Subject) {
		t.Fatalf("after 3 attempts: status %s retries %d last error %q, want failed 3 naming the missing stream", status, retries, lastErr)
	}
	for name, want := range map[string]float64{"outbox_failed_total": 1, "outbox_publish_retries_total": 2, "outbox_outage_deferrals_total": 0} {
		if v := metricValue(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	// Fix the cause: create the stream, then redrive.
	_, err = natsjs.EnsureStream(ctx, f.nc.JS, natsjs.StreamConfig(missing, missing))
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, f.nc.JS, missing)
	if n, err := r.Redrive(ctx, msg.ID); err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	if n, err := r.PublishBatch(ctx); err != nil || n != 1 {
		t.Fatalf("after redrive: claimed %d, err %v", n, err)
	}
	testenv.Must(t, f.db.Raw("SELECT status FROM local_message WHERE message_no = ?", msg.ID).Row().Scan(&status))
	s, err := f.nc.JS.Stream(ctx, missing)
	testenv.Must(t, err)
	info, err := s.Info(ctx)
	testenv.Must(t, err)
	if status != outbox.StatusSent || info.State.Msgs != 1 {
		t.Fatalf("after redrive: status %s, stream holds %d messages; want sent and 1", status, info.State.Msgs)
	}
}

// apiDownJS is a JetStream context whose API stops answering while down is
// set, as when JetStream is down but the NATS connection is up: its stream
// lookups get no responders. Publishes still go to the real server.
type apiDownJS struct {
	jetstream.JetStream
	down atomic.Bool
}

func (j *apiDownJS) StreamNameBySubject(ctx context.Context, subject string) (string, error) {
	if j.down.Load() {
		return "", nats.ErrNoResponders
	}
	return j.JetStream.StreamNameBySubject(ctx, subject)
}

// No responders while JetStream itself does not answer is an outage, not a
// fault of the message: the batch that finds it defers its rows without
// spending a retry, and the relay then pauses, touching no row, until a
// stream lookup gets an answer; the rows go at the first poll after that.
func TestJetStreamNotAnsweringDefersOnceThenPausesUntilItAnswers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	subject := "nojs" + strings.ToLower(testenv.RandomSuffix(8))
	msg := outbox.Message{ID: "wait-" + testenv.RandomSuffix(12), Subject: subject + ".x", Body: []byte(`{}`)}
	testenv.Must(t, f.db.Transaction(func(tx *gormDB) error { return outbox.Add(tx, msg) }))
	js := &apiDownJS{JetStream: f.nc.JS}
	js.down.Store(true)

	reg := newRegistry()
	r, err := outbox.NewRelay(f.db, js, outbox.Config{BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxRetries: 1, PublishTimeout: 2 * time.Second}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	if n, err := r.PublishBatch(ctx); err != nil || n != 1 {
		t.Fatalf("first batch: claimed %d, err %v", n, err)
	}
	row := func() (status string, retries int, lastErr string, updated time.Time) {
		testenv.Must(t, f.db.Raw("SELECT status, retry_count, COALESCE(last_error, ''), updated_at FROM local_message WHERE message_no = ?", msg.ID).Row().Scan(&status, &retries, &lastErr, &updated))
		return
	}
	status, retries, lastErr, deferredAt := row()
	if status != outbox.StatusPending || retries != 0 || !strings.Contains(lastErr, "JetStream not answering") {
		t.Fatalf("after the first batch: status %s retries %d last error %q, want pending 0 saying JetStream is not answering", status, retries, lastErr)
	}
	for range 3 {
		time.Sleep(5 * time.Millisecond) // the row is due again
		if n, err := r.PublishBatch(ctx); err != nil || n != 0 {
			t.Fatalf("while JetStream does not answer: claimed %d, err %v; want a pause", n, err)
		}
	}
	if _, _, _, updated := row(); !updated.Equal(deferredAt) {
		t.Fatalf("the row was written again at %s during the pause", updated)
	}
	for name, want := range map[string]float64{"outbox_outage_deferrals_total": 1, "outbox_outage_skips_total": 3, "outbox_failed_total": 0, "outbox_publish_retries_total": 0} {
		if v := metricValue(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	// JetStream answers again, with a stream for the subject.
	_, err = natsjs.EnsureStream(ctx, f.nc.JS, natsjs.StreamConfig(subject, subject))
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, f.nc.JS, subject)
	js.down.Store(false)
	if n, err := r.PublishBatch(ctx); err != nil || n != 1 {
		t.Fatalf("after JetStream answers: claimed %d, err %v", n, err)
	}
	if status, _, _, _ := row(); status != outbox.StatusSent {
		t.Fatalf("after JetStream answers: status %s, want sent", status)
	}
}

// The cleanup job deletes only sent rows older than the retention, in
// batches, and never pending or failed ones.
func TestCleanupDeletesOldSentRowsOnly(t *testing.T) {
	f := newFixture(t)
	f.addMessages(25, 25)
	old := time.Now().UTC().Add(-48 * time.Hour)
	testenv.Must(t, f.db.Exec("UPDATE local_message SET status = 'sent', sent_at = ?, created_at = ? WHERE id <= (SELECT m FROM (SELECT MIN(id) + 19 AS m FROM local_message) x)", old, old).Error)
	testenv.Must(t, f.db.Exec("UPDATE local_message SET status = 'failed' WHERE status = 'pending' LIMIT 2").Error)
	// Every row is old now: the pending and failed ones must survive anyway.
	testenv.Must(t, f.db.Exec("UPDATE local_message SET created_at = ?", old).Error)
	r := f.relay(f.nc.JS, outbox.Config{Retention: 24 * time.Hour, CleanupBatch: 6})
	n, err := r.Cleanup(context.Background())
	testenv.Must(t, err)
	if n != 20 {
		t.Fatalf("cleanup deleted %d rows, want 20", n)
	}
	if left := f.count("SELECT COUNT(*) FROM local_message"); left != 5 {
		t.Fatalf("%d rows left, want 5 (3 pending + 2 failed)", left)
	}
}

func TestConfigRefusesRetrySpanBeyondDuplicateWindow(t *testing.T) {
	if err := (outbox.Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	cfg := outbox.Config{MaxRetries: 30, MaxBackoff: time.Minute}.WithDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "duplicate window") {
		t.Fatalf("30 retries of up to a minute span %s > %s; Validate said %v", cfg.RetrySpan(), events.DuplicateWindow, err)
	}
	// The hand-off comes before the poll's first attempt: it counts in the
	// span, and it must leave Send the time to get its PubAcks.
	cfg = outbox.Config{Handoff: 8 * time.Minute}.WithDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "duplicate window") || cfg.RetrySpan() <= 8*time.Minute {
		t.Fatalf("a hand-off of 8 minutes before the default retries spans %s > %s; Validate said %v", cfg.RetrySpan(), events.DuplicateWindow, err)
	}
	cfg = outbox.Config{Handoff: 3 * time.Second, PublishTimeout: 2 * time.Second}.WithDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "OUTBOX_HANDOFF must be at least twice OUTBOX_PUBLISH_TIMEOUT") {
		t.Fatalf("a hand-off of 3s with a publish timeout of 2s; Validate said %v", err)
	}
}

// Rows committed without Send or Wake (a replica that crashed right after
// its commit, say) are published by the safety-net poll alone, once their
// hand-off has passed; the backlog shows in Stats until then.
func TestPollPublishesWithoutSendOrWake(t *testing.T) {
	f := newFixture(t)
	r, err := outbox.NewRelay(f.db, f.nc.JS, shortHandoff, testenv.Logger(t), newRegistry())
	testenv.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	f.addMessages(30, 10)
	st, err := outbox.Stats(context.Background(), f.db)
	testenv.Must(t, err)
	if st.Pending != 30 || st.Failed != 0 || st.OldestPendingAge <= 0 {
		t.Fatalf("stats before the poll: %+v", st)
	}
	testenv.WaitFor(t, 10*time.Second, "polls to publish the rows", func() bool {
		testenv.Must(t, r.Poll(context.Background())) // what the platform's outbox-poll job runs
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == 30
	})
	if early := f.count("SELECT COUNT(*) FROM local_message WHERE sent_at < created_at + INTERVAL 1 SECOND"); early != 0 {
		t.Fatalf("%d rows were published inside their hand-off, which is Send's", early)
	}
	if got := f.streamMsgs(); got != 30 {
		t.Fatalf("stream has %d messages, want 30", got)
	}
}

// The poll samples the backlog into outbox_pending_messages and
// outbox_oldest_pending_age_seconds: failed and sent rows are not backlog,
// the age is the oldest pending row's, and the next poll after the backlog
// is published brings both back to zero. The failed rows are sampled into
// outbox_failed_messages, which stays up until a redrive.
func TestPollSamplesBacklogGauges(t *testing.T) {
	f := newFixture(t)
	reg := newRegistry()
	// Not running: the poll's wake publishes nothing, so the sample sees
	// the rows still pending.
	r, err := outbox.NewRelay(f.db, f.nc.JS, outbox.Config{PollSchedule: "@every 1s"}, testenv.Logger(t), reg)
	testenv.Must(t, err)
	f.addMessages(12, 4)
	testenv.Must(t, f.db.Exec("UPDATE local_message SET created_at = ? WHERE id = (SELECT m FROM (SELECT MIN(id) AS m FROM local_message) x)", time.Now().UTC().Add(-90*time.Second)).Error)
	testenv.Must(t, f.db.Exec("UPDATE local_message SET status = 'failed', created_at = ? WHERE id = (SELECT m FROM (SELECT MAX(id) AS m FROM local_message) x)", time.Now().UTC().Add(-time.Hour)).Error)

	testenv.Must(t, r.Poll(context.Background()))
	testenv.WaitFor(t, 5*time.Second, "a poll to sample the backlog", func() bool {
		return testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outbox_pending_messages Messages waiting to be published (the backlog), sampled by the poll job.
# TYPE outbox_pending_messages gauge
outbox_pending_messages 11
`), "outbox_pending_messages") == nil
	})
	if failed := metricValue(t, reg, "outbox_failed_messages"); failed != 1 {
		t.Fatalf("outbox_failed_messages = %v, want the one failed row", failed)
	}
	if age := metricValue(t, reg, "outbox_oldest_pending_age_seconds"); age < 90 || age > 120 {
		t.Fatalf("outbox_oldest_pending_age_seconds = %v, want the 90s-old pending row's age (not the failed row's hour)", age)
	}

	n, err := r.PublishBatch(context.Background())
	if err != nil || n != 11 {
		t.Fatalf("publish the backlog: %d, %v", n, err)
	}
	testenv.Must(t, r.Poll(context.Background()))
	testenv.WaitFor(t, 5*time.Second, "a poll to sample the empty backlog", func() bool {
		return metricValue(t, reg, "outbox_pending_messages") == 0 && metricValue(t, reg, "outbox_oldest_pending_age_seconds") == 0
	})
	if failed := metricValue(t, reg, "outbox_failed_messages"); failed != 1 {
		t.Fatalf("outbox_failed_messages = %v after the publish, want the failed row still counted until a redrive", failed)
	}
	if _, err := outbox.Redrive(context.Background(), f.db); err != nil {
		t.Fatal(err)
	}
	testenv.Must(t, r.Poll(context.Background()))
	testenv.WaitFor(t, 5*time.Second, "a poll after the redrive", func() bool {
		return metricValue(t, reg, "outbox_failed_messages") == 0
	})
}
