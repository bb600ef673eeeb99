package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
)

// orders answers every order as waiting for payment of user 9: the order
// service before its order.cancelled reached this service.
type orders struct{}

func (orders) Order(_ context.Context, userID uint64, no string) (payment.Order, error) {
	return payment.Order{OrderNo: no, UserID: userID, PayAmount: 100, Status: payment.OrderWaitPay}, nil
}

// platform must never be called: the orders this test pays are closed.
type platformStub struct{ t *testing.T }

func (p platformStub) Charge(context.Context, psp.ChargeRequest) (psp.ChargeResponse, error) {
	p.t.Error("a closed order's payment was charged")
	return psp.ChargeResponse{}, errors.New("unexpected")
}
func (p platformStub) Close(context.Context, string) (psp.CloseResponse, error) {
	return psp.CloseResponse{}, errors.New("unexpected")
}
func (p platformStub) Query(context.Context, string) (psp.Trade, error) {
	return psp.Trade{}, errors.New("unexpected")
}
func (p platformStub) Refund(context.Context, psp.RefundRequest) (psp.RefundResponse, error) {
	return psp.RefundResponse{}, errors.New("unexpected")
}

// TestOrderCancelledIsRecordedOnce drives order.cancelled from JetStream
// through the inbox consumer into the payments table: the cancellation is
// recorded on an order's existing payment once (a republish, and the same
// order under another message number, keep the earliest), an order without a
// payment gets a CLOSED placeholder that refuses a later POST /payments,
// twenty copies for one unpaid order at once leave one placeholder, and an
// unreadable event or one without an order is dead-lettered.
func TestOrderCancelledIsRecordedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// The service's own order.cancelled consumer, as paymenttest assembles
	// it, three refusals before a dead letter.
	svc := paymenttest.Start(t, paymenttest.Config{Vars: map[string]string{"INBOX_MAX_DELIVER": "3"},
		Options: assembly.Options{Orders: orders{}, Platform: platformStub{t}}})
	a, st, db := svc.App, svc.Store, svc.DB
	existing, _, err := st.Create(ctx, payment.Payment{OutTradeNo: "P-existing", OrderNo: "O-1", UserID: 9, Amount: 100, Status: payment.StatusWaitPay})
	testenv.Must(t, err)
	conn := testenv.NATS(t)
	subject := svc.Config.Events.Subject(events.OrderCancelled)

	publish := func(id string, body any) {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		_, err := conn.JS.Publish(ctx, subject, b, jetstream.WithMsgID(id))
		testenv.Must(t, err)
	}
	first := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	cancelled := events.OrderCancelledV1{OrderNo: "O-1", UserID: 9, Reason: events.CancelCustomer, CancelledAt: first}
	publish("e1", cancelled)
	publish("e1", cancelled) // a republish: dropped by the stream or by the inbox
	later := cancelled
	later.Reason, later.CancelledAt = events.CancelTimeout, first.Add(time.Minute)
	publish("e2", later) // the same order under another id: the earliest stays, in any order
	publish("e3", events.OrderCancelledV1{OrderNo: "O-2", UserID: 9, Reason: events.CancelTimeout, CancelledAt: first})
	for i := range 20 {
		publish(fmt.Sprintf("e-storm-%d", i), events.OrderCancelledV1{OrderNo: "O-3", UserID: 9, Reason: events.CancelTimeout, CancelledAt: first})
	}
	publish("e-bad", []byte("{not json"))
	publish("e-empty", events.OrderCancelledV1{UserID: 9})

	const distinct = 3 + 20 + 2
	testenv.WaitFor(t, 30*time.Second, "the inbox to handle every event", func() bool {
		var handled, dead int64
		testenv.Must(t, db.Table("processed_message").Count(&handled).Error)
		testenv.Must(t, db.Table("dead_message").Count(&dead).Error)
		return handled+dead >= distinct
	})
	var dead int64
	testenv.Must(t, db.Table("dead_message").Count(&dead).Error)
	if dead != 2 {
		t.Fatalf("%d dead messages, want the unreadable one and the one without an order", dead)
	}

	p, err := st.Get(ctx, existing.OutTradeNo)
	testenv.Must(t, err)
	if p.Status != payment.StatusWaitPay || p.OrderCancelledAt == nil || !p.OrderCancelledAt.Equal(first) || p.CancelReason != events.CancelCustomer {
		t.Fatalf("existing payment %+v: want WAIT_PAY (recording decides nothing) with the first cancellation", p)
	}
	placeholder, err := st.GetByOrder(ctx, "O-2")
	testenv.Must(t, err)
	if placeholder.Status != payment.StatusClosed || placeholder.UserID != 9 || placeholder.OrderCancelledAt == nil || placeholder.CancelReason != events.CancelTimeout {
		t.Fatalf("placeholder %+v: want CLOSED, user 9, the cancellation", placeholder)
	}
	var rows int64
	testenv.Must(t, db.Table("payments").Where("order_no = ?", "O-3").Count(&rows).Error)
	if rows != 1 {
		t.Fatalf("%d payments for O-3 after 20 cancellations at once, want 1", rows)
	}

	// A payment for a cancelled order is refused, even when the order
	// service's answer is stale.
	if _, _, err := a.CreatePayment(ctx, 9, "O-2"); !errors.Is(err, payment.ErrOrderClosed) {
		t.Fatalf("paying a cancelled order: %v, want ErrOrderClosed", err)
	}
}
