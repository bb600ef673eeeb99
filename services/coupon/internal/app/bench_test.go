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

// prepare issues n coupons and lands one message per coupon, each for its own
// order, outside the timer.
func (f *fixture) prepare(b *testing.B, n int) []coupon.Message {
	b.Helper()
	msgs := make([]coupon.Message, n)
	for i := range n {
		c, err := f.app.IssueCoupon(ctx, f.tpl.ID, 7)
		testenv.Must(b, err)
		msgs[i] = f.landB(b, fmt.Sprintf("bm%d", i), fmt.Sprintf("BO%d", i), 7, c.ID)
	}
	return msgs
}

func (f *fixture) landB(b *testing.B, messageID, orderNo string, userID, couponID uint64) coupon.Message {
	testenv.Must(b, f.store.InTx(ctx, func(tx coupon.Tx) error {
		return f.app.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: messageID, OrderNo: orderNo, UserID: userID, CouponID: couponID})
	}))
	var id uint64
	testenv.Must(b, f.store.DB().Table("coupon_message").Where("message_id = ?", messageID).Pluck("id", &id).Error)
	m, err := f.store.Message(ctx, id)
	testenv.Must(b, err)
	return m
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
