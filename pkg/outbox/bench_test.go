package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/sqlcount"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// Run with:
//
//	cd pkg && go test -run '^$' -bench . -benchtime 1x ./outbox/
//
// Each benchmark reports its own rate or latency via ReportMetric; the
// ns/op column is the wall time of one whole run and can be ignored.

var benchBody = []byte(`{"order_no":"O20260101000000000deadbeef","user_id":42,"amount":129900,"coupon_id":7,"created_at":"2026-01-01T00:00:00Z"}`)

// BenchmarkJetStreamAsyncPublish is the ceiling: raw async publishes with a
// Nats-Msg-Id, waiting for every PubAck, no database.
func BenchmarkJetStreamAsyncPublish(b *testing.B) {
	f := newFixture(b)
	const n = 100_000
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		run := testenv.RandomSuffix(6)
		for i := range n {
			m := nats.NewMsg(f.subject())
			m.Data = benchBody
			m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", run, i))
			if _, err := f.nc.JS.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-f.nc.JS.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("PubAcks did not arrive")
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
	}
}

// insertRows commits n pending rows quickly (multi-row statements), as the
// business transactions would have.
func insertRows(b *testing.B, db *gorm.DB, subject string, n int) {
	b.Helper()
	const per = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i += per {
		msgs := make([]outbox.Message, 0, per)
		for range min(per, n-i) {
			msgs = append(msgs, outbox.Message{Subject: subject, Body: benchBody})
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkRelayThroughput measures committed rows → PubAck → marked sent
// for 100,000 rows, with 1 and 3 relay instances (each on its own NATS
// connection, as separate replicas would be) draining one table. Batches of
// 2000 with 2 workers keep 4000 publishes in flight per connection, the
// client's PublishAsyncMaxPending default.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, relays := range []int{1, 3} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			const n = 100_000
			f := newFixture(b)
			for range b.N {
				b.StopTimer()
				testenv.Must(b, f.db.Exec("DELETE FROM local_message").Error)
				insertRows(b, f.db, f.subject(), n)
				var rs []*outbox.Relay
				for range relays {
					conn := testenv.NATS(b)
					rs = append(rs, f.relay(conn.JS, outbox.Config{BatchSize: 2000, Workers: 2}))
				}
				b.StartTimer()
				start := time.Now()
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for _, r := range rs {
					wg.Go(func() { _ = r.Run(ctx) })
					r.Wake() // the rows are fresh: the claim path takes them on a Wake, as from a producer that does not Send
				}
				// Watch the stream (cheap, on the NATS side) rather than
				// counting pending rows, which would load the database
				// being measured; then wait for the last mark-sent commits.
				base := f.streamMsgs()
				for f.streamMsgs() < base+n {
					time.Sleep(10 * time.Millisecond)
				}
				for f.count("SELECT COUNT(*) FROM local_message WHERE status = 'pending'") > 0 {
					time.Sleep(5 * time.Millisecond)
				}
				elapsed := time.Since(start)
				cancel()
				wg.Wait()
				b.StopTimer()
				if sent := f.count("SELECT COUNT(*) FROM local_message WHERE status = 'sent'"); sent != n {
					b.Fatalf("%d sent, want %d", sent, n)
				}
				b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCommitToPublishLatency commits 1,000 orders/s (one transaction
// each: an orders-like row plus its outbox row, then Wake) for five
// seconds, and measures from the commit's return to the message reaching a
// subscriber of the subject: the delay a consumer sees.
func BenchmarkCommitToPublishLatency(b *testing.B) {
	f := newFixture(b)
	testenv.Must(b, f.db.Exec("CREATE TABLE bench_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, no VARCHAR(64) NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB").Error)
	const rate, seconds = 1000, 5
	for range b.N {
		b.StopTimer()
		r := f.relay(f.nc.JS, outbox.Config{})
		stop := run(b, r)
		var mu sync.Mutex
		committed := map[string]time.Time{}
		received := map[string]time.Time{}
		done := make(chan struct{})
		// The subscriber may see a message before the committing goroutine
		// recorded its commit time (the relay is that fast), so both sides
		// record and the latencies are joined at the end.
		sub, err := f.nc.NC.Subscribe(f.subject(), func(m *nats.Msg) {
			now := time.Now()
			id := m.Header.Get(jetstream.MsgIDHeader)
			mu.Lock()
			defer mu.Unlock()
			if _, seen := received[id]; !seen {
				received[id] = now
				if len(received) == rate*seconds {
					close(done)
				}
			}
		})
		testenv.Must(b, err)
		b.StartTimer()
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		for i := range rate * seconds {
			<-tick.C
			wg.Go(func() {
				id := fmt.Sprintf("lat-%s-%d", strings.ToLower(testenv.RandomSuffix(6)), i)
				err := f.db.Transaction(func(tx *gorm.DB) error {
					if err := tx.Exec("INSERT INTO bench_order (no, amount) VALUES (?, ?)", id, 129900).Error; err != nil {
						return err
					}
					return outbox.Add(tx, outbox.Message{ID: id, Subject: f.subject(), Body: benchBody})
				})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				committed[id] = time.Now()
				mu.Unlock()
				r.Wake()
			})
		}
		tick.Stop()
		wg.Wait()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			mu.Lock()
			b.Fatalf("only %d of %d messages seen", len(received), rate*seconds)
		}
		b.StopTimer()
		var latencies []time.Duration
		mu.Lock()
		for id, t0 := range committed {
			latencies = append(latencies, max(0, received[id].Sub(t0)))
		}
		mu.Unlock()
		_ = sub.Unsubscribe()
		stop()
		slices.Sort(latencies)
		pct := func(p float64) float64 {
			return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(1.0), "max-ms")
		b.StartTimer()
	}
}

// BenchmarkPublishPaths compares the two ways a committed event reaches
// JetStream: publish on commit (Send after each commit) and the claim path
// (Wake after each commit, as the services' stores did before Send), with
// the safety-net poll running every second as in production. Each
// transaction is an order-like row and its one event, committed by 50
// goroutines (requests): at rate=200, 200 transactions/s for 10 s, a
// production-like load; at rate=max, 5,000 transactions as fast as they
// commit. It reports events/s (from the first commit to the last event
// seen by a subscriber), the SQL statements and commits the relay sent
// per event (its own pool, counted by sqlcount; the business transactions
// are not counted), and the latency from commit to subscriber.
func BenchmarkPublishPaths(b *testing.B) {
	for _, path := range []string{"claim", "eager"} {
		for _, rate := range []int{200, 0} {
			name := fmt.Sprintf("path=%s/rate=%d", path, rate)
			if rate == 0 {
				name = "path=" + path + "/rate=max"
			}
			b.Run(name, func(b *testing.B) { benchPublishPath(b, path == "eager", rate) })
		}
	}
}

func benchPublishPath(b *testing.B, eager bool, rate int) {
	const producers = 50
	total := 5000
	if rate > 0 {
		total = rate * 10
	}
	f := newFixture(b)
	testenv.Must(b, f.db.Exec("CREATE TABLE bench_order (id BIGINT AUTO_INCREMENT PRIMARY KEY, no VARCHAR(64) NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB").Error)
	for range b.N {
		b.StopTimer()
		counted, n := sqlcount.Of(b, f.db)
		r, reg := f.relayOn(counted, f.nc.JS, outbox.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		var bg sync.WaitGroup
		bg.Go(func() { _ = r.Run(ctx) })
		bg.Go(func() {
			tick := time.NewTicker(time.Second) // OUTBOX_POLL_SCHEDULE's default
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					_ = r.Poll(ctx)
				}
			}
		})
		var mu sync.Mutex
		committed := make(map[string]time.Time, total)
		received := make(map[string]time.Time, total)
		done := make(chan struct{})
		sub, err := f.nc.NC.Subscribe(f.subject(), func(m *nats.Msg) {
			now := time.Now()
			id := m.Header.Get(jetstream.MsgIDHeader)
			mu.Lock()
			defer mu.Unlock()
			if _, seen := received[id]; !seen {
				received[id] = now
				if len(received) == total {
					close(done)
				}
			}
		})
		testenv.Must(b, err)
		time.Sleep(100 * time.Millisecond) // Run's start-up poll has passed
		before := n.Counts()
		run := strings.ToLower(testenv.RandomSuffix(6))
		b.StartTimer()

		start := time.Now()
		jobs := make(chan int, total)
		if rate == 0 {
			for i := range total {
				jobs <- i
			}
			close(jobs)
		} else {
			go func() {
				// Paced by the schedule, not a ticker: after a stall the
				// missed transactions are offered at once, so the rate
				// offered is the rate asked for.
				every := time.Second / time.Duration(rate)
				for i := range total {
					time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
					jobs <- i
				}
				close(jobs)
			}()
		}
		var wg sync.WaitGroup
		for range producers {
			wg.Go(func() {
				for i := range jobs {
					id := fmt.Sprintf("pp-%s-%d", run, i)
					msgs := []outbox.Message{{ID: id, Subject: f.subject(), Body: benchBody}}
					err := f.db.Transaction(func(tx *gorm.DB) error {
						if err := tx.Exec("INSERT INTO bench_order (no, amount) VALUES (?, ?)", id, 129900).Error; err != nil {
							return err
						}
						return outbox.Add(tx, msgs...)
					})
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					committed[id] = time.Now()
					mu.Unlock()
					if eager {
						r.Send(msgs...)
					} else {
						r.Wake()
					}
				}
			})
		}
		wg.Wait()
		select {
		case <-done:
		case <-time.After(time.Minute):
			mu.Lock()
			b.Fatalf("only %d of %d events seen", len(received), total)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		// Every row marked sent, so the statements of the marks are in.
		for f.count("SELECT COUNT(*) FROM local_message WHERE status = 'pending'") > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		bg.Wait()
		got := n.Counts().Sub(before)
		_ = sub.Unsubscribe()
		var latencies []time.Duration
		mu.Lock()
		for id, t0 := range committed {
			latencies = append(latencies, max(0, received[id].Sub(t0)))
		}
		mu.Unlock()
		slices.Sort(latencies)
		pct := func(p float64) float64 {
			return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(got.Statements)/float64(total), "stmts/event")
		b.ReportMetric(float64(got.Commits)/float64(total), "commits/event")
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		// The share of the events the claim path published: all of them
		// on its path; on Send's, those Send skipped or failed.
		b.ReportMetric(testenv.Metric(b, reg, "outbox_claimed_total")/float64(total), "claimed/event")
		b.Logf("%d events: the relay sent %s; Send skipped %v, failed %v", total, got,
			testenv.MetricBy(b, reg, "outbox_eager_skipped_total", "reason"), testenv.Metric(b, reg, "outbox_eager_failed_total"))
		testenv.Must(b, f.db.Exec("DELETE FROM local_message").Error)
		b.StartTimer()
	}
}
