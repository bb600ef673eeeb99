package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/sqlcount"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// noPoll is a relay configuration whose hand-off outlasts any test: a row
// the poll publishes before it would be a row Send did not publish.
var noPoll = outbox.Config{Handoff: 5 * time.Minute}

// shortHandoff is a relay configuration whose poll publishes the rows Send
// did not within a second of their commit.
var shortHandoff = outbox.Config{Handoff: time.Second, PublishTimeout: 400 * time.Millisecond, ClaimLease: time.Second}

// sendAll sends each transaction's messages from a goroutine of its own,
// as a store's requests would, and waits for every Send to return.
func sendAll(r *outbox.Relay, txs [][]outbox.Message) {
	var wg sync.WaitGroup
	for _, msgs := range txs {
		wg.Go(func() { r.Send(msgs...) })
	}
	wg.Wait()
}

// TestSendPublishesOnceWithoutAClaimOrATransaction: 1,000 events committed
// in 100 transactions and handed to Send are each in the stream once and
// marked sent, and all the relay sent the database for them is a few
// coalesced UPDATEs: no claim, no transaction, no commit.
func TestSendPublishesOnceWithoutAClaimOrATransaction(t *testing.T) {
	f := newFixture(t)
	counted, n := sqlcount.Of(t, f.db)
	r, reg := f.relayOn(counted, f.nc.JS, noPoll)
	stop := runAlone(t, r)
	// The poll Run makes as it starts is a claim: one transaction, which
	// finds nothing. What follows it is Send's alone.
	testenv.WaitFor(t, 10*time.Second, "the start-up poll to commit", func() bool { return n.Counts().Commits == 1 })
	before := n.Counts()

	var txs [][]outbox.Message
	var ids []string
	for range 100 {
		msgs := f.commit(10)
		txs = append(txs, msgs)
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
	}
	sendAll(r, txs)
	testenv.WaitFor(t, 20*time.Second, "1,000 rows sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == 1000
	})
	// A mark is visible once the server committed it, a moment before the
	// client has its answer: read the counts once Run has returned.
	stop()
	got := n.Counts().Sub(before)

	inStream := f.streamIDs()
	if len(inStream) != len(ids) {
		t.Fatalf("the stream holds %d distinct ids, want %d", len(inStream), len(ids))
	}
	for _, id := range ids {
		if inStream[id] != 1 {
			t.Fatalf("message %s is in the stream %d times, want 1", id, inStream[id])
		}
	}
	if got.Transactions != 0 || got.Commits != 0 || got.Verbs["SELECT"] != 0 || got.Statements != got.Verbs["UPDATE"] || got.Statements > 40 {
		t.Fatalf("for 1,000 events the relay sent %s; want no transaction and no claim, only a few dozen UPDATEs at most", got)
	}
	for name, want := range map[string]float64{
		"outbox_eager_published_total": 1000, "outbox_published_total": 1000, "outbox_claimed_total": 0,
		"outbox_eager_skipped_total": 0, "outbox_eager_failed_total": 0,
		"outbox_eager_settle_statements_total": float64(got.Statements),
	} {
		if v := testenv.Metric(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	t.Logf("1,000 events: %s", got)
}

// TestPollNotNeededOnTheHappyPath: requests commit an order row and its
// event and hand the event to Send, 40 at a time, with no poll running:
// a consumer gets every event exactly once, and the claim path never
// claimed a row.
func TestPollNotNeededOnTheHappyPath(t *testing.T) {
	const requests = 1000
	f := newFixture(t)
	testenv.Must(t, f.db.Exec("CREATE TABLE bench_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, no VARCHAR(64) NOT NULL) ENGINE=InnoDB").Error)
	f.consume("happy")
	r, reg := f.relayOn(f.db, f.nc.JS, noPoll)
	runAlone(t, r)

	var wg sync.WaitGroup
	for w := range 40 {
		wg.Go(func() {
			for i := range requests / 40 {
				msgs := []outbox.Message{{Subject: f.subject(), Body: []byte(`{}`)}}
				err := f.db.Transaction(func(tx *gorm.DB) error {
					if err := tx.Exec("INSERT INTO bench_order (no) VALUES (?)", fmt.Sprintf("O-%d-%d", w, i)).Error; err != nil {
						return err
					}
					return outbox.Add(tx, msgs...)
				})
				if err != nil {
					t.Error(err)
					return
				}
				r.Send(msgs...)
			}
		})
	}
	wg.Wait()
	testenv.WaitFor(t, 30*time.Second, "every event's effect", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= requests })
	testenv.WaitFor(t, 10*time.Second, "every row sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == requests
	})
	if d := f.count("SELECT COUNT(*) FROM (SELECT message_id FROM effect GROUP BY message_id HAVING COUNT(*) > 1) d"); d != 0 {
		t.Fatalf("%d events had more than one effect", d)
	}
	if c := testenv.Metric(t, reg, "outbox_claimed_total"); c != 0 {
		t.Fatalf("the claim path claimed %v rows; Send alone should have published them", c)
	}
}

// TestCrashBeforeSendPublishedByThePollAfterTheHandoff: rows whose
// transaction committed but whose Send never came (the process died in
// between) are published once by the poll, and not before their hand-off
// has passed: until then they are Send's.
func TestCrashBeforeSendPublishedByThePollAfterTheHandoff(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for range 10 {
		for _, m := range f.commit(5) {
			ids = append(ids, m.ID)
		}
	}
	r, reg := f.relayOn(f.db, f.nc.JS, shortHandoff)
	runPolled(t, r)
	testenv.WaitFor(t, 20*time.Second, "the poll to publish the rows", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == int64(len(ids))
	})
	if early := f.count("SELECT COUNT(*) FROM local_message WHERE sent_at < created_at + INTERVAL 1 SECOND"); early != 0 {
		t.Fatalf("%d rows were published inside their hand-off", early)
	}
	inStream := f.streamIDs()
	for _, id := range ids {
		if inStream[id] != 1 {
			t.Fatalf("message %s is in the stream %d times, want 1", id, inStream[id])
		}
	}
	// A claim whose PubAcks are late on a busy machine is retried, so the
	// poll may claim a row more than once; Send never published one.
	if c, e := testenv.Metric(t, reg, "outbox_claimed_total"), testenv.Metric(t, reg, "outbox_eager_published_total"); c < float64(len(ids)) || e != 0 {
		t.Fatalf("the poll claimed %v rows and Send published %v, want every row claimed and none sent by Send", c, e)
	}
}

// TestCrashAfterPubAckBeforeTheMark: a relay publishes what Send handed it
// and dies before the UPDATE that marks the rows sent. The rows stay as
// committed; after their hand-off the poll of another relay publishes them
// again, JetStream drops every copy (PubAck.Duplicate), the rows end sent,
// and the consumer has one effect per event.
func TestCrashAfterPubAckBeforeTheMark(t *testing.T) {
	f := newFixture(t)
	f.consume("crash")
	crashing, _ := f.relayOn(f.db, f.nc.JS, shortHandoff)
	var acked atomic.Int64
	outbox.SetAfterPublish(crashing, func(_ context.Context, ids []string) error {
		acked.Add(int64(len(ids)))
		return errors.New("injected crash between the PubAck and the mark")
	})
	stop := runAlone(t, crashing) // before the commits: its start-up poll finds nothing
	var txs [][]outbox.Message
	var ids []string
	for range 20 {
		msgs := f.commit(5)
		txs = append(txs, msgs)
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
	}
	sendAll(crashing, txs)
	testenv.WaitFor(t, 10*time.Second, "the PubAcks of every message", func() bool { return acked.Load() == int64(len(ids)) })
	stop()
	if got := f.streamMsgs(); got != uint64(len(ids)) {
		t.Fatalf("the stream has %d messages after the publish, want %d", got, len(ids))
	}
	if c := f.count(asCommitted); c != int64(len(ids)) {
		t.Fatalf("%d rows as committed after the crash, want %d", c, len(ids))
	}

	next, reg := f.relayOn(f.db, f.nc.JS, shortHandoff)
	runPolled(t, next)
	testenv.WaitFor(t, 20*time.Second, "the poll to publish the rows again", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == int64(len(ids))
	})
	if got := f.streamMsgs(); got != uint64(len(ids)) {
		t.Fatalf("the stream has %d messages after the republish, want %d (the copies dropped)", got, len(ids))
	}
	// Every republish was a duplicate: at least one per row (a republish
	// retried after a late PubAck answers Duplicate again).
	if d := testenv.Metric(t, reg, "outbox_publish_duplicates_total"); d < float64(len(ids)) {
		t.Fatalf("PubAck.Duplicate seen %v times, want at least %d", d, len(ids))
	}
	testenv.WaitFor(t, 20*time.Second, "every effect", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= int64(len(ids)) })
	for _, id := range ids {
		if c := f.count("SELECT COUNT(*) FROM effect WHERE message_id = ?", id); c != 1 {
			t.Fatalf("message %s had %d effects, want 1", id, c)
		}
	}
}

// TestSendWhileNATSIsDown: while NATS is known down, Send skips (counted)
// and touches no row; a publish that NATS drops mid-flight touches none
// either. No retry is spent, and once NATS is back the poll publishes
// every row after its hand-off, each once in the stream.
func TestSendWhileNATSIsDown(t *testing.T) {
	f := newFixture(t)
	srv, conn, stream := f.outage(t)
	cfg := shortHandoff
	cfg.Handoff = 3 * time.Second
	r, reg := f.relayOn(f.db, conn.JS, cfg)
	runPolled(t, r)

	down := f.commit(30)
	r.Send(down...)
	if s := testenv.Metric(t, reg, "outbox_eager_skipped_total", "reason", "unavailable"); s != 30 {
		t.Fatalf("Send skipped %v messages with NATS down, want 30", s)
	}
	testenv.WaitFor(t, 10*time.Second, "polls paused by the outage", func() bool { return testenv.Metric(t, reg, "outbox_outage_skips_total") >= 3 })
	if c := f.count(asCommitted); c != 30 {
		t.Fatalf("%d rows as committed during the outage, want 30", c)
	}
	srv.Start()
	f.drainedInto(t, conn, stream, 30)

	// NATS goes down with a Send on the wire: whatever was acknowledged is
	// marked sent, and the rest stays as committed for the poll.
	cut := f.commit(30)
	r.Send(cut...)
	srv.Stop()
	testenv.WaitFor(t, 5*time.Second, "the client to notice the outage", func() bool { return !conn.NC.IsConnected() })
	testenv.WaitFor(t, 10*time.Second, "Send's publishes to settle", func() bool {
		settled := testenv.Metric(t, reg, "outbox_eager_published_total") + testenv.Metric(t, reg, "outbox_eager_failed_total")
		return settled == 30 && f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == 30+int64(testenv.Metric(t, reg, "outbox_eager_published_total"))
	})
	if c := f.count("SELECT COUNT(*) FROM local_message WHERE status <> 'sent'"); c != f.count(asCommitted) {
		t.Fatalf("%d rows are not sent but only %d as committed: the cut publish wrote to a row", c, f.count(asCommitted))
	}
	srv.Start()
	f.drainedInto(t, conn, stream, 60)
	if spent := f.count("SELECT COUNT(*) FROM local_message WHERE retry_count <> 0"); spent != 0 {
		t.Fatalf("%d rows spent a retry on the outage", spent)
	}
}

// TestSendSkipsWhatItCannotHold: Send never blocks. Past its queue (4096
// messages, with no relay running to take them) it skips, and after Run
// returned it skips everything; each is counted by reason.
func TestSendSkipsWhatItCannotHold(t *testing.T) {
	f := newFixture(t)
	r, reg := f.relayOn(f.db, f.nc.JS, noPoll)
	msgs := make([]outbox.Message, 4100)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: fmt.Sprintf("never-committed-%d", i), Subject: f.subject()}
	}
	r.Send(msgs...)
	r.Send(outbox.Message{Subject: f.subject()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	testenv.Must(t, r.Run(ctx))
	r.Send(msgs[:7]...)
	got := testenv.MetricBy(t, reg, "outbox_eager_skipped_total", "reason")
	if got["queue_full"] != 4 || got["no_id"] != 1 || got["stopped"] != 4096+7 {
		t.Fatalf("skipped %v, want 4 queue_full, 1 no_id, and as stopped the 4,096 queued when Run ended and the 7 sent after it", got)
	}
	if p := testenv.Metric(t, reg, "outbox_eager_published_total") + testenv.Metric(t, reg, "outbox_eager_failed_total"); p != 0 {
		t.Fatalf("%v messages published by a relay whose Run had ended", p)
	}
}

// TestSendAndPollRaceEveryMessageOnce: 200 goroutines commit and hand
// their events to Send while another relay polls with a hand-off of a few
// hundred milliseconds, short enough to take rows Send is still
// publishing, and a quarter of the transactions never Send (a crash before
// it), which only the poll publishes. Every message is in the stream
// exactly once and every row ends sent. (The poller's publish timeout is
// as short as its hand-off allows, so on a busy machine it times out and
// retries often: its retry budget is large enough not to fail a row.)
func TestSendAndPollRaceEveryMessageOnce(t *testing.T) {
	f := newFixture(t)
	eager, _ := f.relayOn(f.db, f.nc.JS, outbox.Config{})
	runAlone(t, eager)
	poller, reg := f.relayOn(f.db, f.nc.JS, outbox.Config{
		Handoff: 300 * time.Millisecond, PublishTimeout: 150 * time.Millisecond, ClaimLease: time.Second,
		BaseBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRetries: 200, BatchSize: 100,
	})
	runPolled(t, poller)

	var mu sync.Mutex
	var ids []string
	var unsent int64
	var wg sync.WaitGroup
	for g := range 200 {
		wg.Go(func() {
			for i := range 5 {
				msgs := make([]outbox.Message, 1+(g+i)%3)
				for j := range msgs {
					msgs[j] = outbox.Message{Subject: f.subject(), Body: []byte(`{}`)}
				}
				if err := f.db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }); err != nil {
					t.Error(err)
					return
				}
				crashed := (g+i)%4 == 0
				if !crashed {
					eager.Send(msgs...)
				}
				mu.Lock()
				for _, m := range msgs {
					ids = append(ids, m.ID)
				}
				if crashed {
					unsent += int64(len(msgs))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	testenv.WaitFor(t, 2*time.Minute, "every row sent", func() bool {
		return f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'") == int64(len(ids))
	})
	if got := f.streamMsgs(); got != uint64(len(ids)) {
		t.Fatalf("the stream stores %d messages, want %d", got, len(ids))
	}
	inStream := f.streamIDs()
	for _, id := range ids {
		if inStream[id] != 1 {
			t.Fatalf("message %s is in the stream %d times, want 1", id, inStream[id])
		}
	}
	if c := testenv.Metric(t, reg, "outbox_claimed_total"); c < float64(unsent) {
		t.Fatalf("the poll claimed %v rows, fewer than the %d never sent", c, unsent)
	}
	t.Logf("%d messages, %d never sent; the poll claimed %v, %v of its publishes duplicates", len(ids), unsent,
		testenv.Metric(t, reg, "outbox_claimed_total"), testenv.Metric(t, reg, "outbox_publish_duplicates_total"))
}
