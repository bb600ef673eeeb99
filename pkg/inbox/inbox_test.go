package inbox_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

type fixture struct {
	t      *testing.T
	db     *gorm.DB
	nc     *natsjs.Conn
	stream string
}

func newFixture(t *testing.T) *fixture {
	db := testenv.DB(t, inbox.Migrations)
	testenv.Must(t, db.Exec(`CREATE TABLE effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, message_id VARCHAR(128) NOT NULL) ENGINE=InnoDB`).Error)
	nc := testenv.NATS(t)
	name := testenv.UniqueName(t, "S")
	_, err := natsjs.EnsureStream(context.Background(), nc.JS, natsjs.StreamConfig(name, name))
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, nc.JS, name)
	return &fixture{t: t, db: db, nc: nc, stream: name}
}

func (f *fixture) consumer(name string, cfg inbox.Config, h inbox.Handler) *inbox.Consumer {
	cfg.Name, cfg.Stream = name, f.stream
	if cfg.FilterSubjects == nil {
		cfg.FilterSubjects = []string{f.stream + ".x"}
	}
	c, err := inbox.NewConsumer(f.db, f.nc.JS, cfg, h, testenv.Logger(f.t), prometheus.NewRegistry())
	testenv.Must(f.t, err)
	return c
}

func (f *fixture) run(c *inbox.Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

func (f *fixture) publish(id, body string) {
	m := nats.NewMsg(f.stream + ".x")
	m.Data = []byte(body)
	if id != "" {
		m.Header.Set(jetstream.MsgIDHeader, id)
	}
	_, err := f.nc.JS.PublishMsg(context.Background(), m)
	testenv.Must(f.t, err)
}

func (f *fixture) count(q string, args ...any) int64 {
	var n int64
	testenv.Must(f.t, f.db.Raw(q, args...).Row().Scan(&n))
	return n
}

func effect(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
	return tx.Exec("INSERT INTO effect (message_id) VALUES (?)", msg.ID).Error
}

// The same message delivered 50 times at once has one business effect; the
// other 49 are acknowledged as duplicates.
func TestSameMessageFiftyConcurrentDeliveriesOneEffect(t *testing.T) {
	f := newFixture(t)
	var commits atomic.Int64
	c := f.consumer("c", inbox.Config{}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		time.Sleep(5 * time.Millisecond) // widen the race window
		inbox.OnCommit(ctx, func() { commits.Add(1) })
		return effect(ctx, tx, msg)
	})
	var wg sync.WaitGroup
	var processed, dups atomic.Int64
	start := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-start
			out, err := c.Process(context.Background(), inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`)})
			switch {
			case err == nil && out == inbox.Processed:
				processed.Add(1)
			case err == nil && out == inbox.Duplicate:
				dups.Add(1)
			default:
				t.Errorf("unexpected outcome %s, %v", out, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if processed.Load() != 1 || dups.Load() != 49 {
		t.Fatalf("processed %d, duplicates %d; want 1 and 49", processed.Load(), dups.Load())
	}
	if n := f.count("SELECT COUNT(*) FROM effect"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if commits.Load() != 1 {
		t.Fatalf("OnCommit callbacks ran %d times, want 1 (only the committed delivery)", commits.Load())
	}
}

// Through the real stream: a republish of the same id outside JetStream's
// window (here: a second stream message with the same id, which the window
// would normally drop) is acked without effect; the dedup is by consumer, so
// a second consumer applies it once too.
func TestRedeliveryThroughStreamDedupPerConsumer(t *testing.T) {
	f := newFixture(t)
	f.run(f.consumer("a", inbox.Config{}, effect))
	f.run(f.consumer("b", inbox.Config{}, effect))
	f.publish("m-1", `{}`)
	f.publish("m-2", `{}`)
	testenv.WaitFor(t, 10*time.Second, "4 effects", func() bool { return f.count("SELECT COUNT(*) FROM processed_message") == 4 })
	// Simulate the out-of-window republish by handing the same id to the
	// consumer again through Process (the window would drop a real one).
	c := f.consumer("a", inbox.Config{}, effect)
	out, err := c.Process(context.Background(), inbox.Message{ID: "m-1", Subject: f.stream + ".x", Delivered: 1})
	if err != nil || out != inbox.Duplicate {
		t.Fatalf("republish: %s %v, want duplicate", out, err)
	}
	if n := f.count("SELECT COUNT(*) FROM effect"); n != 4 {
		t.Fatalf("%d effects, want 4 (2 messages × 2 consumers)", n)
	}
}

// A failing handler rolls back (no effect, no dedup row), is nak'd with a
// delay and redelivered; after MaxDeliver it is terminated and recorded
// dead with the reason.
func TestHandlerErrorRetriedThenDead(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int64
	f.run(f.consumer("c", inbox.Config{MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		calls.Add(1)
		if err := effect(ctx, tx, msg); err != nil {
			return err
		}
		return errors.New("downstream refused for now")
	}))
	f.publish("m-1", `{}`)
	testenv.WaitFor(t, 10*time.Second, "dead row", func() bool { return f.count("SELECT COUNT(*) FROM dead_message") == 1 })
	time.Sleep(300 * time.Millisecond) // a 4th delivery would arrive by now
	if calls.Load() != 3 {
		t.Fatalf("handler ran %d times, want MaxDeliver = 3", calls.Load())
	}
	if n := f.count("SELECT COUNT(*) FROM effect") + f.count("SELECT COUNT(*) FROM processed_message"); n != 0 {
		t.Fatalf("failed handling left %d rows behind; the transaction must roll back", n)
	}
	var reason string
	var deliveries int
	testenv.Must(t, f.db.Raw("SELECT reason, deliveries FROM dead_message WHERE message_id = 'm-1'").Row().Scan(&reason, &deliveries))
	if !strings.Contains(reason, "downstream refused") || deliveries != 3 {
		t.Fatalf("dead row reason %q deliveries %d", reason, deliveries)
	}
}

// A handler that hangs past AckWait on every delivery never acks, naks or
// terms: without an extra delivery the server would give up after
// MaxDeliver with no dead record. The extra one records the message dead
// ("deliveries exhausted") and terminates it without running the handler.
func TestDeliveriesExhaustedByTimeoutsAreDead(t *testing.T) {
	f := newFixture(t)
	const ackWait = 300 * time.Millisecond
	release := make(chan struct{})
	var mu sync.Mutex
	var ran []uint64 // the deliveries the handler ran on
	f.run(f.consumer("c", inbox.Config{MaxDeliver: 2, DeliveryLimit: 2, AckWait: ackWait, Workers: 4}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		mu.Lock()
		ran = append(ran, msg.Delivered)
		mu.Unlock()
		if err := effect(ctx, tx, msg); err != nil {
			return err
		}
		<-release // a downstream call that never returns
		return errors.New("released at the end of the test")
	}))
	// Registered after run, so it runs first: Run waits for its handlers.
	t.Cleanup(func() { close(release) })
	f.publish("m-1", `{}`)

	testenv.WaitFor(t, 10*time.Second, "dead row", func() bool { return f.count("SELECT COUNT(*) FROM dead_message") == 1 })
	time.Sleep(3 * ackWait) // a further delivery would arrive by now
	// Delivery 2 usually waits on the unique key the hung delivery 1 holds
	// in processed_message and never reaches the handler; either way the
	// handler must not run on delivery 3.
	mu.Lock()
	if len(ran) == 0 || slices.Max(ran) > 2 {
		t.Fatalf("handler ran on deliveries %v, want on 1..2 only", ran)
	}
	mu.Unlock()
	var reason string
	var deliveries int
	testenv.Must(t, f.db.Raw("SELECT reason, deliveries FROM dead_message WHERE message_id = 'm-1'").Row().Scan(&reason, &deliveries))
	if !strings.HasPrefix(reason, "deliveries exhausted") || deliveries != 3 {
		t.Fatalf("dead row reason %q deliveries %d, want deliveries exhausted on delivery 3", reason, deliveries)
	}
	if n := f.count("SELECT COUNT(*) FROM effect") + f.count("SELECT COUNT(*) FROM processed_message"); n != 0 {
		t.Fatalf("%d committed rows, want none: no delivery finished", n)
	}
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, "c")
	testenv.Must(t, err)
	info, err := cons.Info(context.Background())
	testenv.Must(t, err)
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("after the term: %d pending acks, %d pending; want the message settled", info.NumAckPending, info.NumPending)
	}
}

// The extra delivery of a message a handler did commit (its ack was lost)
// is acked as a duplicate, not recorded dead; the handler never runs on it.
func TestExtraDeliveryOfCommittedMessageIsDuplicate(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int64
	c := f.consumer("c", inbox.Config{MaxDeliver: 3, DeliveryLimit: 3}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		calls.Add(1)
		return effect(ctx, tx, msg)
	})
	msg := inbox.Message{ID: "m-1", Subject: f.stream + ".x", Body: []byte(`{}`), Delivered: 1}
	if out, err := c.Process(context.Background(), msg); err != nil || out != inbox.Processed {
		t.Fatalf("first delivery: %s %v", out, err)
	}
	msg.Delivered = 4
	if out, err := c.Process(context.Background(), msg); err != nil || out != inbox.Duplicate {
		t.Fatalf("extra delivery of a committed message: %s %v, want duplicate", out, err)
	}
	other := inbox.Message{ID: "m-2", Subject: f.stream + ".x", Body: []byte(`{}`), Delivered: 4}
	if out, err := c.Process(context.Background(), other); err == nil || out != inbox.Dead {
		t.Fatalf("extra delivery of an uncommitted message: %s %v, want dead", out, err)
	}
	if calls.Load() != 1 || f.count("SELECT COUNT(*) FROM dead_message WHERE message_id = 'm-2'") != 1 || f.count("SELECT COUNT(*) FROM dead_message") != 1 {
		t.Fatalf("handler ran %d times (want 1); dead rows: %d", calls.Load(), f.count("SELECT COUNT(*) FROM dead_message"))
	}
}

// A dead record that cannot be written (here its table is gone) is retried
// by a nak while the server still redelivers; on the last delivery, after
// which a nak brings nothing back, the message is terminated as dropped,
// counted, and logged at error level with what a replay by hand needs.
// (Reporting Retry there, the server dropped it silently.)
func TestDeadRecordFailingOnLastDeliveryIsDroppedAndLogged(t *testing.T) {
	f := newFixture(t)
	logs := &testenv.SyncBuffer{}
	reg := prometheus.NewRegistry()
	var calls atomic.Int64
	c, err := inbox.NewConsumer(f.db, f.nc.JS, inbox.Config{Name: "c", Stream: f.stream, FilterSubjects: []string{f.stream + ".x"}, MaxDeliver: 1, DeliveryLimit: 1, Backoff: []time.Duration{20 * time.Millisecond}},
		func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			calls.Add(1)
			return inbox.Permanent(errors.New("refused for good"))
		}, slog.New(slog.NewJSONHandler(logs, nil)), reg)
	testenv.Must(t, err)
	testenv.Must(t, f.db.Exec("RENAME TABLE dead_message TO dead_message_gone").Error)
	f.run(c)
	body := `{"order_no":"o-1"}`
	f.publish("m-1", body)

	testenv.WaitFor(t, 10*time.Second, "the message dropped", func() bool { return outcomes(t, reg)["dropped"] == 1 })
	time.Sleep(300 * time.Millisecond) // a further delivery would arrive by now
	if got := outcomes(t, reg); got["retry"] != 1 || got["dropped"] != 1 || got["dead"] != 0 || calls.Load() != 1 {
		t.Fatalf("outcomes %v, handler ran %d times; want one retry (delivery 1), one drop (delivery 2), one handler run", got, calls.Load())
	}
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(fmt.Sprint(m["msg"]), "dropped") {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no log line says the message was dropped:\n%s", logs.String())
	}
	raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(line["body_base64"]))
	if line["level"] != "ERROR" || line["consumer"] != "c" || line["message_id"] != "m-1" || line["subject"] != f.stream+".x" ||
		line["delivered"] != 2.0 || !strings.Contains(fmt.Sprint(line["err"]), "dead_message") || string(raw) != body ||
		!strings.Contains(fmt.Sprint(line["headers"]), "m-1") {
		t.Fatalf("the drop log lacks what a replay needs: %v", line)
	}
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, "c")
	testenv.Must(t, err)
	info, err := cons.Info(context.Background())
	testenv.Must(t, err)
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("after the drop: %d pending acks, %d pending; want the message terminated", info.NumAckPending, info.NumPending)
	}
}

// TestNewConsumerExportsEveryOutcomeAtZero: before any delivery a consumer
// already has a zero series per outcome, so increase() sees its first dead
// letter (a series that appeared at 1 would read as no increase).
func TestNewConsumerExportsEveryOutcomeAtZero(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	_, err := inbox.NewConsumer(f.db, f.nc.JS, inbox.Config{Name: "c", Stream: f.stream, FilterSubjects: []string{f.stream + ".x"}},
		func(context.Context, *gorm.DB, inbox.Message) error { return nil }, testenv.Logger(t), reg)
	testenv.Must(t, err)
	want := map[string]float64{"processed": 0, "duplicate": 0, "retry": 0, "dead": 0, "dropped": 0, "held": 0, "interrupted": 0}
	if got := outcomes(t, reg); !maps.Equal(got, want) {
		t.Fatalf("inbox_messages_total of a fresh consumer: %v, want %v", got, want)
	}
}

// outcomes reads inbox_messages_total by outcome.
func outcomes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	testenv.Must(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "inbox_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// A message that cannot be decoded, or whose handler says Permanent, is
// terminated at once and recorded dead; so is one without Nats-Msg-Id.
func TestUndecodableAndPermanentAreDeadAtOnce(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int64
	f.run(f.consumer("c", inbox.Config{MaxDeliver: 5, Backoff: []time.Duration{20 * time.Millisecond}}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		calls.Add(1)
		var v struct {
			N int `json:"n"`
		}
		if err := inbox.DecodeJSON(msg, &v); err != nil {
			return err
		}
		if v.N < 0 {
			return inbox.Permanent(errors.New("negative n"))
		}
		return effect(ctx, tx, msg)
	}))
	f.publish("bad-json", `{not json`)
	f.publish("negative", `{"n":-1}`)
	f.publish("", `{"n":1}`)
	f.publish("good", `{"n":1}`)
	testenv.WaitFor(t, 10*time.Second, "3 dead rows", func() bool { return f.count("SELECT COUNT(*) FROM dead_message") == 3 })
	testenv.WaitFor(t, 10*time.Second, "1 effect", func() bool { return f.count("SELECT COUNT(*) FROM effect") == 1 })
	time.Sleep(200 * time.Millisecond)
	if calls.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3 (each bad message once, the id-less one never)", calls.Load())
	}
	if n := f.count("SELECT COUNT(*) FROM dead_message WHERE message_id LIKE 'seq-%' AND reason LIKE '%Nats-Msg-Id%'"); n != 1 {
		t.Fatalf("id-less message not recorded dead by stream sequence")
	}
	if n := f.count("SELECT COUNT(*) FROM dead_message WHERE message_id = 'bad-json' AND reason LIKE '%decode%'"); n != 1 {
		t.Fatal("undecodable message not recorded dead with its reason")
	}
}

// TestSettingsRefuseADeliveryLimitBelowMaxDeliver: the backstop must leave
// room for every refusal, and the error names the variable.
func TestSettingsRefuseADeliveryLimitBelowMaxDeliver(t *testing.T) {
	s := inbox.Settings{Workers: 4, MaxDeliver: 5, DeliveryLimit: 4, AckWait: time.Second, Retention: time.Hour, DeadRetention: time.Hour, CleanupSchedule: "@every 1m", CleanupBatch: 10}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "INBOX_DELIVERY_LIMIT") {
		t.Fatalf("DeliveryLimit 4 under MaxDeliver 5: %v, want an error naming INBOX_DELIVERY_LIMIT", err)
	}
	s.DeliveryLimit = 5
	testenv.Must(t, s.Validate())
	if got := (inbox.Config{MaxDeliver: 30}).WithDefaults().DeliveryLimit; got != 30 {
		t.Fatalf("default DeliveryLimit with MaxDeliver 30: %d, want 30", got)
	}
}

// NATS 2.9 takes one filter subject per consumer; asking for two fails at
// construction with a clear error instead of at the server.
func TestTwoFilterSubjectsRefusedOnNATS29(t *testing.T) {
	f := newFixture(t)
	version := f.nc.NC.ConnectedServerVersion()
	_, err := inbox.NewConsumer(f.db, f.nc.JS, inbox.Config{Name: "c", Stream: f.stream, FilterSubjects: []string{f.stream + ".a", f.stream + ".b"}}, effect, testenv.Logger(t), nil)
	if strings.HasPrefix(version, "2.9.") {
		if err == nil || !strings.Contains(err.Error(), "one filter subject") {
			t.Fatalf("server %s: want a one-filter-subject error, got %v", version, err)
		}
	} else if err != nil {
		t.Fatalf("server %s supports several filter subjects: %v", version, err)
	}
}

// Stopping the consumer lets a handler already running commit and ack: no
// rollback, no redelivery after a clean shutdown.
func TestRunStopsAfterInFlightHandlerCommits(t *testing.T) {
	f := newFixture(t)
	started := make(chan struct{})
	var once sync.Once
	c := f.consumer("c", inbox.Config{}, func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		once.Do(func() { close(started) })
		time.Sleep(300 * time.Millisecond)
		return effect(ctx, tx, msg)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	f.publish("m-1", `{}`)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never started")
	}
	cancel()
	select {
	case err := <-done:
		testenv.Must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := f.count("SELECT COUNT(*) FROM effect"); n != 1 {
		t.Fatalf("%d effects after shutdown, want the in-flight one committed", n)
	}
	// The ack is sent before Run returns; the server applies it a moment
	// later, so the consumer's state is polled. A message left unacked
	// stays pending for AckWait (30 s) and fails this.
	cons, err := f.nc.JS.Consumer(context.Background(), f.stream, "c")
	testenv.Must(t, err)
	testenv.WaitFor(t, 5*time.Second, "the in-flight message acked after shutdown", func() bool {
		info, err := cons.Info(context.Background())
		testenv.Must(t, err)
		return info.NumAckPending == 0 && info.AckFloor.Stream == 1
	})
}

// TestJSONDecodesAndMarksRefusalsPermanent: the body is decoded into the
// event type and applied in the caller's transaction; an unreadable body, or
// an error the domain calls permanent, is Permanent; any other error is
// returned as it is (redelivered).
func TestJSONDecodesAndMarksRefusalsPermanent(t *testing.T) {
	type event struct {
		OrderNo string `json:"order_no"`
	}
	refused, transient := errors.New("refused"), errors.New("transient")
	var applied []string
	h := inbox.JSON(func(_ context.Context, tx string, id string, e event) error {
		applied = append(applied, tx+"/"+id+"/"+e.OrderNo)
		switch e.OrderNo {
		case "refuse":
			return refused
		case "later":
			return transient
		}
		return nil
	}, func(err error) bool { return errors.Is(err, refused) })
	ctx := context.Background()
	msg := func(id, body string) inbox.Message {
		return inbox.Message{ID: id, Subject: "order.paid", Body: []byte(body)}
	}
	if err := h(ctx, "tx", msg("m1", `{"order_no":"O1"}`)); err != nil {
		t.Fatalf("a good event: %v", err)
	}
	if err := h(ctx, "tx", msg("m2", `{not json`)); !inbox.IsPermanent(err) {
		t.Fatalf("an unreadable body: %v, want permanent", err)
	}
	if err := h(ctx, "tx", msg("m3", `{"order_no":"refuse"}`)); !inbox.IsPermanent(err) || !errors.Is(err, refused) {
		t.Fatalf("a refusal: %v, want it permanent", err)
	}
	if err := h(ctx, "tx", msg("m4", `{"order_no":"later"}`)); inbox.IsPermanent(err) || !errors.Is(err, transient) {
		t.Fatalf("a transient error: %v, want it as it is", err)
	}
	if want := []string{"tx/m1/O1", "tx/m3/refuse", "tx/m4/later"}; !slices.Equal(applied, want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}
}
