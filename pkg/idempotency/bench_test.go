package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/idempotency"

	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
)

// BenchmarkCreateOrder measures the throughput of the order-writing test
// handler without the middleware, with Handler (a fresh key per request:
// Redis script, claim insert committed on its own, handler transaction with
// the in-transaction completion) and with HandlerInTx (Redis script, the
// claim inserted completed inside the handler's transaction: no commit of
// its own). It runs under concurrency, where commits are grouped, as in a
// server. Each runs twice: with the project's
// DSN, which interpolates arguments client-side (one round trip per
// statement), and with interpolateParams off, where go-sql-driver prepares,
// executes and closes every statement that has arguments (three).
//
//	go test ./idempotency/ -run '^$' -bench . -benchtime 3s
func BenchmarkCreateOrder(b *testing.B) {
	for _, driver := range []struct {
		name string
		opts []appOption
	}{
		{"interpolated", nil},
		{"prepared", []appOption{withServerSidePrepare(b)}},
	} {
		b.Run(driver.name, func(b *testing.B) {
			app := newTestApp(b, driver.opts...)
			for _, bc := range []struct {
				name, path string
				key        bool
			}{
				{"without", "/unguarded/orders", false},
				{"with", "/orders", true},
				{"with-intx", "/intx/orders", true},
			} {
				b.Run(bc.name, func(b *testing.B) {
					// A server serves many requests at once; 16 per core lets
					// the database group its commits as it does in production.
					b.SetParallelism(16)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							req := app.order("", "bench", orderBody)
							req.Path = bc.path
							if bc.key {
								req.Key = idempotencytest.NewKey()
							}
							if r := idempotencytest.Do(app.handler, req); r.Status != http.StatusCreated {
								b.Errorf("%d %s", r.Status, r.Body)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				})
			}
		})
	}
}

// BenchmarkReplay measures the latency of answering a retry of a completed
// request (Redis hint, one indexed read, the stored response written back).
func BenchmarkReplay(b *testing.B) {
	app := newTestApp(b)
	req := app.order(idempotencytest.NewKey(), "bench", orderBody)
	if r := idempotencytest.Do(app.handler, req); r.Status != http.StatusCreated {
		b.Fatalf("%d %s", r.Status, r.Body)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r := idempotencytest.Do(app.handler, req)
		lat = append(lat, time.Since(start))
		if !r.Replayed {
			b.Fatalf("not replayed: %d", r.Status)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkArchiver measures how fast the archiver deletes expired records
// with the default batch, on rows shaped like POST /orders' (a response body
// of a few hundred bytes), and reports it beside what a purchase rate needs:
// a purchase leaves two records (its order's and its payment's), so 200
// purchases/s write 400 records/s, and the archiver must delete faster than
// that, within the budget of one run per schedule tick.
//
//	go test ./idempotency/ -run '^$' -bench Archiver -benchtime 1x
func BenchmarkArchiver(b *testing.B) {
	const rows = 50_000
	app := newTestApp(b)
	cfg := idempotency.DefaultConfig()
	body := strings.Repeat("x", 400)
	for range b.N {
		b.StopTimer()
		expired := time.Now().UTC().Add(-cfg.Retention - time.Hour)
		for start := 0; start < rows; start += 1000 {
			var sb strings.Builder
			args := make([]any, 0, 3000)
			sb.WriteString("INSERT INTO idempotency_record (scope, idem_key, fingerprint, status, owner, response_status, response_body, locked_until, expire_time, created_at, updated_at) VALUES ")
			for i := start; i < start+1000; i++ {
				if i > start {
					sb.WriteString(", ")
				}
				sb.WriteString("(?, ?, 'fp', 'SUCCEEDED', 'owner', 201, ?, ?, ?, ?, ?)")
				args = append(args, fmt.Sprintf("u%d POST /orders", i), fmt.Sprintf("k%d-%d", b.N, i), body)
				args = append(args, expired, expired, expired, expired)
			}
			if err := app.db.Exec(sb.String(), args...).Error; err != nil {
				b.Fatal(err)
			}
		}
		arch, err := idempotency.NewArchiver(app.mw.Store(), cfg, slog.Default(), prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		n, err := arch.RunOnce(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if n != rows {
			b.Fatalf("one run deleted %d of %d expired records", n, rows)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "records/s")
		b.ReportMetric(float64(cfg.ArchiveBatch*cfg.ArchiveMaxBatches), "records/run")
	}
}
