package idempotency_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

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
