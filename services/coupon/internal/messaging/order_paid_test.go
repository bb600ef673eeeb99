package messaging_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
)

// noOrders is the sweeper's order service in tests that never sweep.
type noOrders struct{}

func (noOrders) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", coupon.ErrOrderServiceUnavailable
}

// TestOrderPaidFlowsFromJetStreamToOneDeduction drives the whole pipeline of
// incident 1 through the service as it runs (coupontest), on real NATS and
// MariaDB: the coupon locked by ORDER-1, order.paid events are consumed by
// the inbox into coupon_message, and each delivery deducts at once. A
// second event for the same order (another message id) lands too, and is
// absorbed by the state machine; an order without coupon and a malformed
// event land nothing. The retry job runs hourly here, so what settles the
// messages is the delivery, and a pass run by hand finds nothing left.
func TestOrderPaidFlowsFromJetStreamToOneDeduction(t *testing.T) {
	ctx := context.Background()
	svc := coupontest.Start(t, map[string]string{"COUPON_RETRY_SCHEDULE": "@every 1h"}, assembly.Options{Orders: noOrders{}})
	tpl, err := svc.App.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	c, err := svc.App.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	_, err = svc.App.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "ORDER-1", UserID: 7, OrderAmount: 5000})
	testenv.Must(t, err)

	couponID := c.ID
	paid := events.OrderPaidV1{OrderNo: "ORDER-1", UserID: 7, Amount: 5000, CouponID: &couponID, PaymentNo: "P1", PaidAt: time.Now().UTC()}
	svc.Publish(t, events.OrderPaid, "e1", paid)
	svc.Publish(t, events.OrderPaid, "e1", paid) // a republish: dropped by the stream or by the inbox
	svc.Publish(t, events.OrderPaid, "e2", paid) // the same order under another id: lands, then absorbed
	svc.Publish(t, events.OrderPaid, "e3", events.OrderPaidV1{OrderNo: "ORDER-2", UserID: 7, Amount: 100, PaymentNo: "P2"})
	svc.Publish(t, events.OrderPaid, "e4", []byte("{not json"))

	testenv.WaitFor(t, 30*time.Second, "the inbox to handle the four distinct ids", func() bool {
		return svc.Count(t, "processed_message", "1 = 1")+svc.Count(t, "dead_message", "1 = 1") >= 4
	})
	if n := svc.Count(t, "dead_message", "message_id = ?", "e4"); n != 1 {
		t.Fatalf("the malformed event has %d dead-letter rows, want 1", n)
	}
	var landed []string
	testenv.Must(t, svc.DB().Table("coupon_message").Order("message_id").Pluck("message_id", &landed).Error)
	if len(landed) != 2 || landed[0] != "e1" || landed[1] != "e2" {
		t.Fatalf("landed %v, want [e1 e2]", landed)
	}
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "both messages settled on delivery", func() (bool, string) {
		var settled []string
		testenv.Must(t, svc.DB().Table("coupon_message").Where("status = ?", "SUCCESS").Order("message_id").Pluck("message_id", &settled).Error)
		return len(settled) == 2, fmt.Sprintf("settled %v, want [e1 e2]: deducted (e1) and absorbed (e2)", settled)
	})
	r, err := svc.App.ProcessDueMessages(ctx)
	testenv.Must(t, err)
	if r.Claimed != 0 {
		t.Fatalf("retry pass = %+v, want nothing left for it", r)
	}
	if n := svc.Count(t, "coupon_deduction", "order_no = ?", "ORDER-1"); n != 1 {
		t.Fatalf("%d ledger rows for ORDER-1, want 1", n)
	}
}
