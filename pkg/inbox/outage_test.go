package inbox_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// cutDB opens another pool on f's database through a forwarder the test can
// cut, so that only the consumer that uses it loses MySQL; f.db keeps
// reaching the server for the test's own reads.
func (f *fixture) cutDB() (*gorm.DB, *testenv.Forwarder) {
	f.t.Helper()
	var name string
	testenv.Must(f.t, f.db.Raw("SELECT DATABASE()").Scan(&name).Error)
	cfg := testenv.Config(f.t).MySQL
	fwd := testenv.NewForwarder(f.t, cfg.Addr)
	cfg.Addr = fwd.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, name, testenv.Logger(f.t))
	testenv.Must(f.t, err)
	f.t.Cleanup(func() { _ = database.Close(db) })
	return db, fwd
}

// newConsumer declares a consumer of f's stream on db and js.
func (f *fixture) newConsumer(db *gorm.DB, js jetstream.JetStream, reg prometheus.Registerer, name string, cfg inbox.Config, h inbox.Handler) *inbox.Consumer {
	f.t.Helper()
	cfg.Name, cfg.Stream, cfg.FilterSubjects = name, f.stream, []string{f.stream + ".x"}
	c, err := inbox.NewConsumer(db, js, cfg, h, testenv.Logger(f.t), reg)
	testenv.Must(f.t, err)
	return c
}

// start runs c until the returned stop is called or the test ends.
func start(t *testing.T, c *inbox.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// effects is a handler that records one effect per message and the
// deliveries it ran on.
type effects struct {
	pause     time.Duration // how long each handler takes, to keep deliveries in flight
	commits   atomic.Int64
	mu        sync.Mutex
	delivered map[string][]uint64
}

func (e *effects) handle(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
	e.mu.Lock()
	if e.delivered == nil {
		e.delivered = map[string][]uint64{}
	}
	e.delivered[msg.ID] = append(e.delivered[msg.ID], msg.Delivered)
	e.mu.Unlock()
	time.Sleep(e.pause)
	inbox.OnCommit(ctx, func() { e.commits.Add(1) })
	return effect(ctx, tx, msg)
}

// maxDelivered is the highest delivery count any handler ran on.
func (e *effects) maxDelivered() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var top uint64
	for _, ds := range e.delivered {
		for _, d := range ds {
			top = max(top, d)
		}
	}
	return top
}

// requireOnceEach fails t unless each of the n messages published as
// m-0 … m-(n-1) has exactly one effect and one processed row, and nothing
// was refused or recorded dead.
func (f *fixture) requireOnceEach(n int) {
	f.t.Helper()
	testenv.Eventually(f.t, 60*time.Second, 100*time.Millisecond, fmt.Sprintf("%d effects", n), func() (bool, string) {
		got := f.count("SELECT COUNT(*) FROM effect")
		if got >= int64(n) {
			return true, ""
		}
		var applied []string
		testenv.Must(f.t, f.db.Raw("SELECT message_id FROM effect").Scan(&applied).Error)
		var missing []string
		for i := range n {
			if id := fmt.Sprintf("m-%d", i); !slices.Contains(applied, id) && len(missing) < 5 {
				missing = append(missing, id)
			}
		}
		return false, fmt.Sprintf("%d effects; missing %v; the consumer: %s", got, missing, f.consumerState())
	})
	if total, distinct := f.count("SELECT COUNT(*) FROM effect"), f.count("SELECT COUNT(DISTINCT message_id) FROM effect"); total != int64(n) || distinct != int64(n) {
		f.t.Fatalf("%d effects of %d messages, want %d of %d: a message was applied twice", total, distinct, n, n)
	}
	if got := f.count("SELECT COUNT(*) FROM processed_message"); got != int64(n) {
		f.t.Fatalf("%d processed rows, want %d", got, n)
	}
	if dead, refused := f.count("SELECT COUNT(*) FROM dead_message"), f.count("SELECT COUNT(*) FROM refused_message"); dead != 0 || refused != 0 {
		var reasons []string
		testenv.Must(f.t, f.db.Raw("SELECT reason FROM refused_message UNION ALL SELECT reason FROM dead_message").Scan(&reasons).Error)
		f.t.Fatalf("after the outage: %d dead letters and %d refusal counts, want none: an outage is not a refusal; reasons: %q", dead, refused, reasons)
	}
}

// consumerState describes the durable consumer "c" as the server sees it.
func (f *fixture) consumerState() string {
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, "c")
	if err != nil {
		return err.Error()
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d unacknowledged, %d pending, %d redelivered, %d deliveries", info.NumAckPending, info.NumPending, info.NumRedelivered, info.Delivered.Consumer)
}

// settled waits until the durable consumer name has nothing pending and
// nothing unacknowledged, and returns how many deliveries the server made
// in all, redeliveries included.
func (f *fixture) settled(name string) uint64 {
	f.t.Helper()
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, name)
	testenv.Must(f.t, err)
	var deliveries uint64
	testenv.Eventually(f.t, 30*time.Second, 100*time.Millisecond, "the consumer settled", func() (bool, string) {
		info, err := cons.Info(context.Background())
		testenv.Must(f.t, err)
		deliveries = info.Delivered.Consumer
		return info.NumAckPending == 0 && info.NumPending == 0, fmt.Sprintf("%d unacknowledged, %d pending", info.NumAckPending, info.NumPending)
	})
	return deliveries
}

// TestOutageHoldsDeliveriesAndLosesNothing: MySQL is cut from the
// consumer's pool with deliveries in its workers and in the client's
// buffer, more are published during the cut, and the cut outlasts what
// today's limits allow (2 deliveries 50 ms apart for one in a worker, 3 ×
// AckWait for a buffered one). The consumer pauses instead of spending attempts: after
// the cut heals every message has exactly one effect, nothing is dead,
// no refusal was counted, and the pause gauge went up and came down.
func TestOutageHoldsDeliveriesAndLosesNothing(t *testing.T) {
	f := newFixture(t)
	db, fwd := f.cutDB()
	reg := prometheus.NewRegistry()
	const ackWait = 5 * time.Second
	e := &effects{pause: 20 * time.Millisecond}
	c := f.newConsumer(db, f.nc.JS, reg, "c", inbox.Config{Workers: 8, MaxDeliver: 2, AckWait: ackWait, Backoff: []time.Duration{50 * time.Millisecond}}, e.handle)
	start(t, c)
	paused := func() float64 { return testenv.Metric(t, reg, "inbox_paused", "consumer", "c") }
	held := func() float64 { return testenv.Metric(t, reg, "inbox_held_messages", "consumer", "c") }

	const before, during = 60, 40
	for i := range before {
		f.publish(fmt.Sprintf("m-%d", i), `{}`)
	}
	testenv.WaitFor(t, 10*time.Second, "some messages processed", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= 5 })
	fwd.Close()
	testenv.WaitFor(t, 10*time.Second, "the consumer paused", func() bool { return paused() == 1 })
	for i := range during {
		f.publish(fmt.Sprintf("m-%d", before+i), `{}`)
	}
	testenv.WaitFor(t, 10*time.Second, "deliveries held", func() bool { return held() > 0 })
	time.Sleep(4 * ackWait) // far past MaxDeliver × Backoff, and past (MaxDeliver+1) × AckWait
	if p, h := paused(), held(); p != 1 || h == 0 {
		t.Fatalf("during the cut: inbox_paused %v, inbox_held_messages %v; want 1 and some", p, h)
	}
	if n := f.count("SELECT COUNT(*) FROM refused_message") + f.count("SELECT COUNT(*) FROM dead_message"); n != 0 {
		t.Fatalf("%d refusal or dead rows during the cut, want none", n)
	}
	// Paused, it pulls nothing: what was published during the cut is
	// still on the server.
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, "c")
	testenv.Must(t, err)
	info, err := cons.Info(context.Background())
	testenv.Must(t, err)
	if info.NumPending < during {
		t.Fatalf("%d messages left on the server during the cut, want the %d published during it: the paused consumer kept pulling", info.NumPending, during)
	}
	fwd.Reopen()

	f.requireOnceEach(before + during)
	testenv.WaitFor(t, 10*time.Second, "the consumer resumed", func() bool { return paused() == 0 && held() == 0 })
	deliveries := f.settled("c")
	t.Logf("%d deliveries of %d messages; outcomes %v", deliveries, before+during, testenv.MetricBy(t, reg, "inbox_messages_total", "outcome"))
	out := testenv.MetricBy(t, reg, "inbox_messages_total", "outcome")
	if out["retry"] != 0 || out["dead"] != 0 || out["dropped"] != 0 || out["held"] == 0 {
		t.Fatalf("outcomes %v: want held deliveries and no retry, dead or dropped one", out)
	}
	if n := testenv.Metric(t, reg, "inbox_pauses_total", "consumer", "c"); n < 1 {
		t.Fatalf("inbox_pauses_total %v, want at least 1", n)
	}
	// A held delivery is kept alive with InProgress and settled on the
	// same delivery after the cut: the server delivered a message twice
	// only after an interrupted delivery's nak.
	if want := before + during + uint64(out["interrupted"]); deliveries != want {
		t.Fatalf("the server made %d deliveries of %d messages (%v interrupted), want %d: held deliveries were redelivered", deliveries, before+during, out["interrupted"], want)
	}
}

// TestHungMySQLHoldsDeliveries: MySQL stops answering without closing
// anything (a stalled forwarder), so statements hang instead of failing.
// Each delivery's deadline ends its wait, a ping finds MySQL silent, and the
// consumer pauses as for a cut; when MySQL answers again every message has
// one effect, and nothing was refused or dead.
func TestHungMySQLHoldsDeliveries(t *testing.T) {
	f := newFixture(t)
	db, fwd := f.cutDB()
	reg := prometheus.NewRegistry()
	const ackWait = 4 * time.Second
	e := &effects{}
	c := f.newConsumer(db, f.nc.JS, reg, "c", inbox.Config{Workers: 4, MaxDeliver: 2, AckWait: ackWait, Backoff: []time.Duration{50 * time.Millisecond}}, e.handle)
	start(t, c)
	t.Cleanup(fwd.Resume) // before the consumer stops, should the test fail stalled
	const n = 30
	for i := range 10 {
		f.publish(fmt.Sprintf("m-%d", i), `{}`)
	}
	testenv.WaitFor(t, 10*time.Second, "the first messages processed", func() bool { return f.count("SELECT COUNT(*) FROM effect") == 10 })
	fwd.Stall()
	for i := 10; i < n; i++ {
		f.publish(fmt.Sprintf("m-%d", i), `{}`)
	}
	testenv.WaitFor(t, 20*time.Second, "the consumer paused", func() bool { return testenv.Metric(t, reg, "inbox_paused", "consumer", "c") == 1 })
	time.Sleep(2 * ackWait)
	fwd.Resume()

	f.requireOnceEach(n)
	deliveries := f.settled("c")
	t.Logf("%d deliveries of %d messages; outcomes %v", deliveries, n, testenv.MetricBy(t, reg, "inbox_messages_total", "outcome"))
	if out := testenv.MetricBy(t, reg, "inbox_messages_total", "outcome"); out["held"] == 0 || out["retry"] != 0 {
		t.Fatalf("outcomes %v, want held deliveries and no refusal", out)
	}
}

// TestRestartDuringPause: the consumer's process stops or dies while it is
// paused, holding deliveries; another instance on the same durable, also
// cut from MySQL at first, gets them, pauses, and applies each once when
// MySQL is back. The deliveries the first process held count no refusal.
func TestRestartDuringPause(t *testing.T) {
	for _, how := range []string{"stopped", "died"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			const ackWait = 2 * time.Second
			cfg := inbox.Config{Workers: 4, MaxDeliver: 2, AckWait: ackWait, Backoff: []time.Duration{50 * time.Millisecond}}

			// The first process has a NATS connection and a pool of its own.
			dbA, fwdA := f.cutDB()
			ncA := testenv.NATS(t)
			regA := prometheus.NewRegistry()
			stopA := start(t, f.newConsumer(dbA, ncA.JS, regA, "c", cfg, (&effects{}).handle))
			fwdA.Close()
			const n = 30
			for i := range n {
				f.publish(fmt.Sprintf("m-%d", i), `{}`)
			}
			testenv.WaitFor(t, 10*time.Second, "the first process paused, holding deliveries", func() bool {
				return testenv.Metric(t, regA, "inbox_held_messages", "consumer", "c") > 0
			})

			dbB, fwdB := f.cutDB()
			fwdB.Close()
			regB := prometheus.NewRegistry()
			e := &effects{}
			start(t, f.newConsumer(dbB, f.nc.JS, regB, "c", cfg, e.handle))
			switch how {
			case "stopped":
				stopA() // it naks what it holds
			case "died":
				// Its deliveries are no longer kept alive and it can ack
				// nothing; its MySQL stays cut, so it never runs a handler.
				ncA.NC.Close()
			}
			testenv.WaitFor(t, 20*time.Second, "the second process paused, holding the first one's deliveries", func() bool {
				return testenv.Metric(t, regB, "inbox_held_messages", "consumer", "c") > 0
			})
			time.Sleep(2 * ackWait)
			fwdB.Reopen()

			f.requireOnceEach(n)
			f.settled("c")
			if d := e.maxDelivered(); d < 2 {
				t.Fatalf("the second process ran handlers on deliveries up to %d; want the first process's deliveries redelivered", d)
			}
		})
	}
}

// TestNATSDownLosesNothing: NATS is killed while deliveries are in flight
// and started again on the same store. Nothing is delivered meanwhile; the
// handlers' commits stand, their acks are lost, and the redeliveries that
// follow meet the dedup rows: every message has one effect, none was
// refused or dead.
func TestNATSDownLosesNothing(t *testing.T) {
	f := newFixture(t)
	srv := testenv.NewNATSServer(t, "-js", "-sd", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := natsjs.Connect(ctx, natsjs.Config{URL: srv.URL()}, t.Name(), testenv.Logger(t))
	testenv.Must(t, err)
	defer nc.NC.Close()
	_, err = natsjs.EnsureStream(ctx, nc.JS, natsjs.StreamConfig(f.stream, f.stream))
	testenv.Must(t, err)
	f.nc = nc // publish and inspect on the test's own server
	reg := prometheus.NewRegistry()
	e := &effects{pause: 50 * time.Millisecond}
	start(t, f.newConsumer(f.db, nc.JS, reg, "c", inbox.Config{Workers: 8, MaxDeliver: 2, AckWait: 2 * time.Second, Backoff: []time.Duration{50 * time.Millisecond}}, e.handle))
	const before, after = 40, 20
	for i := range before {
		f.publish(fmt.Sprintf("m-%d", i), `{}`)
	}
	testenv.WaitFor(t, 10*time.Second, "some messages processed", func() bool { return f.count("SELECT COUNT(*) FROM effect") >= 5 })
	srv.Stop()
	time.Sleep(2 * time.Second)
	srv.Start()
	testenv.WaitFor(t, 10*time.Second, "the client to reconnect", nc.NC.IsConnected)
	for i := range after {
		f.publish(fmt.Sprintf("m-%d", before+i), `{}`)
	}
	f.requireOnceEach(before + after)
	f.settled("c")
	t.Logf("outcomes %v", testenv.MetricBy(t, reg, "inbox_messages_total", "outcome"))
}

// TestManyWorkersPauseTogether: 32 workers lose MySQL three times while
// 400 messages flow; each time they pause together and resume, and every
// message has exactly one effect.
func TestManyWorkersPauseTogether(t *testing.T) {
	f := newFixture(t)
	db, fwd := f.cutDB()
	reg := prometheus.NewRegistry()
	e := &effects{}
	c := f.newConsumer(db, f.nc.JS, reg, "c", inbox.Config{Workers: 32, MaxDeliver: 2, AckWait: 3 * time.Second, Backoff: []time.Duration{50 * time.Millisecond}}, e.handle)
	start(t, c)
	const n = 400
	var published atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			f.publish(fmt.Sprintf("m-%d", i), `{}`)
			published.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for cut := range 3 {
		// Each cut begins once the consumer has resumed from the last and
		// applied more: in-flight workers may still commit during a pause.
		want := int64(cut+1) * 50
		testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d effects, running, before cut %d", want, cut+1), func() bool {
			return testenv.Metric(t, reg, "inbox_paused", "consumer", "c") == 0 && f.count("SELECT COUNT(*) FROM effect") >= want
		})
		fwd.Close()
		testenv.WaitFor(t, 10*time.Second, "the consumer paused", func() bool { return testenv.Metric(t, reg, "inbox_paused", "consumer", "c") == 1 })
		time.Sleep(500 * time.Millisecond)
		fwd.Reopen()
	}
	<-done
	f.requireOnceEach(n)
	f.settled("c")
	if pauses := testenv.Metric(t, reg, "inbox_pauses_total", "consumer", "c"); pauses < 3 {
		t.Fatalf("inbox_pauses_total %v, want at least one pause per cut (3)", pauses)
	}
	if paused := testenv.Metric(t, reg, "inbox_paused", "consumer", "c"); paused != 0 {
		t.Fatalf("inbox_paused %v after the last cut healed, want 0", paused)
	}
}

// TestRefusalsNotDeliveriesCountAgainstMaxDeliver: the count that
// dead-letters a message is its handler's refusals, kept in the database:
// a high delivery count (deliveries an outage ended) kills nothing, and
// refusals add up across calls whatever their delivery number, as across
// redeliveries and restarts.
func TestRefusalsNotDeliveriesCountAgainstMaxDeliver(t *testing.T) {
	f := newFixture(t)
	c := f.consumer("c", inbox.Config{MaxDeliver: 3, DeliveryLimit: 20}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		return fmt.Errorf("refused on delivery %d", msg.Delivered)
	})
	msg := inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`)}
	for i, tc := range []struct {
		delivered uint64
		want      inbox.Outcome
	}{
		{15, inbox.Retry}, // refusal 1, on a delivery far beyond MaxDeliver
		{1, inbox.Retry},  // refusal 2: the delivery count does not reset it
		{1, inbox.Dead},   // refusal 3 = MaxDeliver
	} {
		msg.Delivered = tc.delivered
		out, err := c.Process(context.Background(), msg)
		if out != tc.want || err == nil {
			t.Fatalf("call %d (delivery %d): %s %v, want %s with the refusal", i+1, tc.delivered, out, err, tc.want)
		}
		if i < 2 {
			if n := f.count("SELECT refusals FROM refused_message WHERE consumer = 'c' AND message_id = 'm-1'"); n != int64(i+1) {
				t.Fatalf("after refusal %d: refused_message says %d", i+1, n)
			}
		}
	}
	if n := f.count("SELECT COUNT(*) FROM dead_message WHERE message_id = 'm-1' AND reason LIKE 'refused 3 times%'"); n != 1 {
		t.Fatal("the third refusal did not record the message dead with its refusals")
	}
	if n := f.count("SELECT COUNT(*) FROM refused_message"); n != 0 {
		t.Fatalf("%d refusal rows after the message died, want none (a replay starts afresh)", n)
	}
}

// TestBrokenConnectionWhileMySQLAnswersIsNoRefusal: a handler whose
// connection is killed under it, on a MySQL that answers, gets Interrupted
// (nak'd, no refusal counted), and the next delivery applies the message.
// So does a delivery that waits on a lock past its deadline: its time ran
// out, it did not refuse; DeliveryLimit bounds a message that keeps doing
// it.
func TestBrokenConnectionWhileMySQLAnswersIsNoRefusal(t *testing.T) {
	f := newFixture(t)
	var kill atomic.Bool
	kill.Store(true)
	testenv.Must(t, f.db.Exec("CREATE TABLE lockme (id INT PRIMARY KEY)").Error)
	testenv.Must(t, f.db.Exec("INSERT INTO lockme VALUES (1)").Error)
	c := f.consumer("c", inbox.Config{MaxDeliver: 2}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		if msg.ID == "locked" {
			return tx.Exec("UPDATE lockme SET id = id WHERE id = 1").Error
		}
		if kill.CompareAndSwap(true, false) {
			var id int64
			if err := tx.Raw("SELECT CONNECTION_ID()").Scan(&id).Error; err != nil {
				return err
			}
			if err := f.db.Exec("KILL CONNECTION ?", id).Error; err != nil {
				return err
			}
		}
		return effect(ctx, tx, msg)
	})
	msg := inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`), Delivered: 1}
	if out, err := c.Process(context.Background(), msg); out != inbox.Interrupted || !database.IsUnavailable(err) {
		t.Fatalf("a killed connection: %s %v, want interrupted", out, err)
	}
	if n := f.count("SELECT COUNT(*) FROM refused_message"); n != 0 {
		t.Fatalf("%d refusals counted for a killed connection, want none", n)
	}
	msg.Delivered = 2
	if out, err := c.Process(context.Background(), msg); out != inbox.Processed || err != nil {
		t.Fatalf("the next delivery: %s %v, want processed", out, err)
	}

	holder := f.db.Begin()
	defer holder.Rollback()
	testenv.Must(t, holder.Exec("UPDATE lockme SET id = id WHERE id = 1").Error)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	locked := inbox.Message{ID: "locked", Subject: f.stream + ".x", Body: []byte(`{}`), Delivered: 1}
	if out, err := c.Process(ctx, locked); out != inbox.Interrupted || err == nil {
		t.Fatalf("a lock wait past the deadline on a MySQL that answers: %s %v, want interrupted", out, err)
	}
	if n := f.count("SELECT COUNT(*) FROM refused_message"); n != 0 {
		t.Fatalf("%d refusals counted for a delivery that ran out of time, want none", n)
	}
}

// TestHeldWhileMySQLIsUnreachable: Process on a pool that cannot reach
// MySQL reports Held and records nothing, whatever the delivery.
func TestHeldWhileMySQLIsUnreachable(t *testing.T) {
	f := newFixture(t)
	db, fwd := f.cutDB()
	reg := prometheus.NewRegistry()
	var calls atomic.Int64
	c := f.newConsumer(db, f.nc.JS, reg, "c", inbox.Config{MaxDeliver: 1, DeliveryLimit: 1}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		calls.Add(1)
		return effect(ctx, tx, msg)
	})
	fwd.Close()
	for _, delivered := range []uint64{1, 2} { // the last allowed one, and the extra one
		out, err := c.Process(context.Background(), inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`), Delivered: delivered})
		if out != inbox.Held || !database.IsUnavailable(err) {
			t.Fatalf("delivery %d with MySQL cut: %s %v, want held", delivered, out, err)
		}
	}
	fwd.Reopen()
	if n := f.count("SELECT COUNT(*) FROM dead_message") + f.count("SELECT COUNT(*) FROM refused_message") + f.count("SELECT COUNT(*) FROM processed_message"); n != 0 || calls.Load() != 0 {
		t.Fatalf("%d rows recorded and %d handler runs with MySQL cut, want none", n, calls.Load())
	}
	if got := testenv.MetricBy(t, reg, "inbox_messages_total", "outcome"); got["held"] != 2 || got["dead"]+got["dropped"]+got["retry"] != 0 {
		t.Fatalf("outcomes %v, want 2 held", got)
	}
}

// TestInboxTransactionSendsNoSet: a delivery's transaction starts with no
// SET statement of its own; the pool's connections are READ COMMITTED
// from the start (database.Open). Counted by the server on a pool of one
// connection, where every statement is the delivery's or the test's.
func TestInboxTransactionSendsNoSet(t *testing.T) {
	f := newFixture(t)
	var name string
	testenv.Must(t, f.db.Raw("SELECT DATABASE()").Scan(&name).Error)
	cfg := testenv.Config(t).MySQL
	cfg.MaxOpenConns = 1
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	testenv.Must(t, err)
	defer database.Close(db)
	c := f.newConsumer(db, f.nc.JS, nil, "c", inbox.Config{}, effect)
	status := func() map[string]int64 {
		rows, err := db.Raw("SHOW SESSION STATUS WHERE Variable_name IN ('Com_set_option', 'Com_begin', 'Com_commit')").Rows()
		testenv.Must(t, err)
		defer rows.Close()
		got := map[string]int64{}
		for rows.Next() {
			var k string
			var v int64
			testenv.Must(t, rows.Scan(&k, &v))
			got[k] = v
		}
		return got
	}
	before := status()
	if out, err := c.Process(ctx, inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`)}); out != inbox.Processed || err != nil {
		t.Fatalf("process: %s %v", out, err)
	}
	after := status()
	if after["Com_begin"]-before["Com_begin"] != 1 || after["Com_commit"]-before["Com_commit"] != 1 {
		t.Fatalf("the delivery ran %d transactions (%v → %v); the counters do not see it", after["Com_begin"]-before["Com_begin"], before, after)
	}
	if n := after["Com_set_option"] - before["Com_set_option"]; n != 0 {
		t.Fatalf("the delivery's transaction sent %d SET statements, want none", n)
	}
}
