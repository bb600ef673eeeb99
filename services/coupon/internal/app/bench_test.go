package app_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// prepare issues n coupons, locks each for its own order and lands that
// order's message, outside the timer.
func (f *fixture) prepare(b *testing.B, n int) []coupon.Message {
	b.Helper()
	msgs := make([]coupon.Message, n)
	for i := range n {
		c, err := f.app.IssueCoupon(ctx, f.tpl.ID, 7)
		testenv.Must(b, err)
		orderNo := fmt.Sprintf("BO%d", i)
		f.lock(b, c.ID, orderNo, 7)
		msgs[i] = f.land(b, fmt.Sprintf("bm%d", i), orderNo, 7, c.ID)
	}
	return msgs
}

// BenchmarkDeduct measures deductions per second of distinct orders, 16
// goroutines per core, for both code paths: the cost of the fix (one
// transaction with a locking read, the ledger row under its unique key and
// the message update inside) against the broken path (plain read, then a
// transaction, then a separate message update), each on its own schema.
func BenchmarkDeduct(b *testing.B) {
	for _, mode := range app.DeductionModes {
		b.Run(string(mode), func(b *testing.B) {
			f := newFixtureB(b, mode)
			msgs := f.prepare(b, b.N)
			var next atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m := msgs[next.Add(1)-1]
					if out, err := f.app.ProcessMessage(ctx, m); out != app.Deducted {
						b.Errorf("%s: %s, %v", m.MessageID, out, err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deductions/s")
		})
	}
}

// BenchmarkAbsorbRetry measures how fast the fixed path answers a retry of
// an order already deducted (the state machine's "already done").
func BenchmarkAbsorbRetry(b *testing.B) {
	f := newFixtureB(b, variant.Fixed)
	m := f.prepare(b, 1)[0]
	if out, err := f.app.ProcessMessage(ctx, m); out != app.Deducted {
		b.Fatalf("%s, %v", out, err)
	}
	b.ResetTimer()
	for range b.N {
		if out, err := f.app.ProcessMessage(ctx, m); out != app.Absorbed {
			b.Fatalf("%s, %v", out, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "retries/s")
}
