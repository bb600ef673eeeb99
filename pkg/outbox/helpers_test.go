package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// fixture is a throwaway database with the outbox and inbox tables, a test
// effects table, and a unique stream on the shared NATS server.
type fixture struct {
	t      testing.TB
	db     *gorm.DB
	nc     *natsjs.Conn
	stream string
	prefix string // subjects are prefix + ".x"
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := testenv.DB(t, outbox.Migrations, inbox.Migrations)
	testenv.Must(t, db.Exec(`CREATE TABLE effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, message_id VARCHAR(128) NOT NULL) ENGINE=InnoDB`).Error)
	nc := testenv.NATS(t)
	name := testenv.UniqueName(t, "S")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natsjs.EnsureStream(ctx, nc.JS, natsjs.StreamConfig(name, name)); err != nil {
		t.Fatal(err)
	}
	testenv.DeleteStreamAtCleanup(t, nc.JS, name)
	return &fixture{t: t, db: db, nc: nc, stream: name, prefix: name}
}

func (f *fixture) subject() string { return f.prefix + ".x" }

// addMessages commits n messages, per transactions of per rows, and returns
// their ids.
func (f *fixture) addMessages(n, per int) []string {
	f.t.Helper()
	var ids []string
	for i := 0; i < n; i += per {
		var msgs []outbox.Message
		for j := i; j < min(n, i+per); j++ {
			msgs = append(msgs, outbox.Message{Subject: f.subject(), Body: fmt.Appendf(nil, `{"n":%d}`, j), Headers: map[string]string{"X-Test": "1"}})
		}
		err := f.db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) })
		testenv.Must(f.t, err)
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// commit commits one transaction of n messages and returns them as Add
// filled them in: what a store hands to Send after its commit.
func (f *fixture) commit(n int) []outbox.Message {
	f.t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{Subject: f.subject(), Body: []byte(`{}`), Headers: map[string]string{"X-Test": "1"}}
	}
	testenv.Must(f.t, f.db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }))
	return msgs
}

func (f *fixture) relay(js jetstream.JetStream, cfg outbox.Config) *outbox.Relay {
	f.t.Helper()
	r, _ := f.relayOn(f.db, js, cfg)
	return r
}

// relayOn returns a relay over db (f.db, or a counted handle on it) and
// the registry of its metrics.
func (f *fixture) relayOn(db *gorm.DB, js jetstream.JetStream, cfg outbox.Config) (*outbox.Relay, *prometheus.Registry) {
	f.t.Helper()
	reg := prometheus.NewRegistry()
	r, err := outbox.NewRelay(db, js, cfg, testenv.Logger(f.t), reg)
	testenv.Must(f.t, err)
	return r, reg
}

// run starts r until the test ends, woken every 50ms (Wake: every row due
// by its next_retry_time, the hand-off ignored), as code that adds rows
// without Send has its rows published.
func run(t testing.TB, r *outbox.Relay) (stop func()) {
	return runTicking(t, r, 50*time.Millisecond, r.Wake)
}

// runPolled starts r until the test ends, polled every 20ms: a fast
// stand-in for the cron safety net (cron cannot go below one second),
// which leaves the rows in their hand-off to Send.
func runPolled(t testing.TB, r *outbox.Relay) (stop func()) {
	return runTicking(t, r, 20*time.Millisecond, func() { outbox.PollNow(r) })
}

// runAlone starts r until the test ends with no poll but the one Run makes
// as it starts: what it publishes after that, Send published.
func runAlone(t testing.TB, r *outbox.Relay) (stop func()) { return runTicking(t, r, 0, nil) }

// runTicking runs r and, unless tick is nil, calls tick every interval.
func runTicking(t testing.TB, r *outbox.Relay, every time.Duration, tick func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	if tick != nil {
		wg.Go(func() {
			ticker := time.NewTicker(every)
			defer ticker.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
					tick()
				}
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// consume counts effects: one effect row per handled message, deduplicated
// by the inbox.
func (f *fixture) consume(name string) {
	f.t.Helper()
	c, err := inbox.NewConsumer(f.db, f.nc.JS, inbox.Config{Name: name, Stream: f.stream, FilterSubjects: []string{f.subject()}, Workers: 8},
		func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			return tx.Exec("INSERT INTO effect (message_id) VALUES (?)", msg.ID).Error
		}, testenv.Logger(f.t), prometheus.NewRegistry())
	testenv.Must(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

func (f *fixture) count(q string, args ...any) int64 {
	f.t.Helper()
	var n int64
	testenv.Must(f.t, f.db.Raw(q, args...).Row().Scan(&n))
	return n
}

func (f *fixture) streamMsgs() uint64 {
	f.t.Helper()
	s, err := f.nc.JS.Stream(context.Background(), f.stream)
	testenv.Must(f.t, err)
	info, err := s.Info(context.Background())
	testenv.Must(f.t, err)
	return info.State.Msgs
}

// streamIDs reads every message of the stream and returns the count per
// Nats-Msg-Id.
func (f *fixture) streamIDs() map[string]int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := f.nc.JS.OrderedConsumer(ctx, f.stream, jetstream.OrderedConsumerConfig{})
	testenv.Must(f.t, err)
	total := f.streamMsgs()
	out := map[string]int{}
	for got := uint64(0); got < total; {
		batch, err := c.FetchNoWait(1000)
		testenv.Must(f.t, err)
		n := 0
		for m := range batch.Messages() {
			out[m.Headers().Get(jetstream.MsgIDHeader)]++
			n++
		}
		got += uint64(n)
		if n == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if ctx.Err() != nil {
			f.t.Fatalf("read stream: %d of %d", got, total)
		}
	}
	return out
}
