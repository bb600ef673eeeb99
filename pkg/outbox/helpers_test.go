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

func (f *fixture) relay(js jetstream.JetStream, cfg outbox.Config) *outbox.Relay {
	f.t.Helper()
	r, err := outbox.NewRelay(f.db, js, cfg, testenv.Logger(f.t), prometheus.NewRegistry())
	testenv.Must(f.t, err)
	return r
}

// run starts r until the test ends, woken every 50ms as a fast stand-in for
// the cron safety net (cron cannot go below one second).
func run(t testing.TB, r *outbox.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				r.Wake()
			}
		}
	})
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
