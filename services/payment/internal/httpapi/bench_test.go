package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
)

// benchConcurrency is the number of callbacks in flight, and benchDupEvery
// makes every tenth callback a redelivery of the one before it (10%
// duplicates).
const (
	benchConcurrency = 50
	benchDupEvery    = 10
)

// BenchmarkCallback measures POST /payments/callback through the full HTTP
// stack against the real database: throughput and latency percentiles at
// concurrency 50 with 10% duplicate notifications, for both handlers.
//
//	go test -run '^$' -bench BenchmarkCallback -benchtime 2000x ./internal/httpapi
func BenchmarkCallback(b *testing.B) {
	for _, mode := range []variant.Mode{variant.Fixed, variant.Broken} {
		b.Run(string(mode), func(b *testing.B) {
			svc := paymenttest.Start(b, paymenttest.Config{Mode: mode, Lab: withLab})
			db := svc.DB

			// One signed notification per op; every tenth repeats the
			// previous one's payment and serial.
			run := testenv.RandomSuffix(6)
			type call struct {
				body []byte
				h    http.Header
			}
			calls := make([]call, b.N)
			var rows []string
			var args []any
			now := time.Now().UTC()
			for i := range b.N {
				src := i
				if i%benchDupEvery == benchDupEvery-1 {
					src = i - 1
				}
				no := fmt.Sprintf("PB%s%09d", run, src)
				if src == i {
					rows = append(rows, "(?, ?, 4200, 'WAIT_PAY', ?, ?)")
					args = append(args, no, "O"+no, now, now)
				}
				calls[i].body, calls[i].h = signedCallback(b, notification(no, "T"+no, 4200))
				if len(rows) == 500 || i == b.N-1 {
					if err := db.Exec("INSERT INTO payments (out_trade_no, order_no, amount, status, created_at, updated_at) VALUES "+strings.Join(rows, ","), args...).Error; err != nil {
						b.Fatal(err)
					}
					rows, args = rows[:0], args[:0]
				}
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
			latencies := make([]time.Duration, b.N)
			jobs := make(chan int)
			var failures sync.Map
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range benchConcurrency {
				wg.Go(func() {
					for i := range jobs {
						t0 := time.Now()
						req, _ := http.NewRequest(http.MethodPost, svc.CallbackURL, bytes.NewReader(calls[i].body))
						req.Header = calls[i].h.Clone()
						req.Header.Set("Content-Type", "application/json")
						resp, err := client.Do(req)
						if err != nil {
							failures.Store(i, err.Error())
							continue
						}
						resp.Body.Close()
						latencies[i] = time.Since(t0)
						if resp.StatusCode != http.StatusOK {
							failures.Store(i, resp.Status)
						}
					}
				})
			}
			for i := range b.N {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()

			failures.Range(func(k, v any) bool { b.Fatalf("callback %v: %v", k, v); return false })
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[min(len(latencies)-1, int(float64(len(latencies))*p))].Microseconds()) / 1000
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "callbacks/s")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")

			// How many records the duplicates left behind, per payment.
			var records, payments int64
			ctx := context.Background()
			db.WithContext(ctx).Raw("SELECT (SELECT COUNT(*) FROM payment_transaction) + (SELECT COUNT(*) FROM payment_transaction_broken)").Scan(&records)
			db.WithContext(ctx).Raw("SELECT COUNT(*) FROM payments").Scan(&payments)
			b.ReportMetric(float64(records)/float64(payments), "records/payment")
		})
	}
}
