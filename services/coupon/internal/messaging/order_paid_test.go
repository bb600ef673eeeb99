package messaging_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// noOrders is the sweeper's order service in tests that never sweep.
type noOrders struct{}

func (noOrders) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", coupon.ErrOrderServiceUnavailable
}

// TestOrderPaidFlowsFromJetStreamToOneDeduction drives the whole pipeline of
// incident 1 against real NATS and MariaDB: the coupon locked by ORDER-1,
// order.paid events are consumed by the inbox into coupon_message, and a
// retry pass deducts. A second event for
// the same order (another message id) lands too, and is absorbed by the state
// machine; an order without coupon and a malformed event land nothing. The
// consumer runs as the platform runs the declaration: under a unique event
// prefix, on the stream and subject it derives from it.
func TestOrderPaidFlowsFromJetStreamToOneDeduction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := testenv.NATS(t)
	ev := events.Config{SubjectPrefix: strings.ToLower(testenv.UniqueName(t, "coupon")) + "."}
	_, err := natsjs.EnsureStream(ctx, conn.JS, natsjs.EventStream(ev, events.OrderPaid))
	testenv.Must(t, err)
	testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName(events.OrderPaid))

	db := testenv.DB(t, migrations.Source, outbox.Migrations, inbox.Migrations)
	st := store.New(db)
	a, err := app.New(st, noOrders{}, app.DefaultConfig(), testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	_, err = a.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "ORDER-1", UserID: 7, OrderAmount: 5000})
	testenv.Must(t, err)

	decl := platform.Bind(st.InboxTx, messaging.OrderPaid(a))
	if decl.Subject != events.OrderPaid {
		t.Fatalf("the consumer reads %q, want %q", decl.Subject, events.OrderPaid)
	}
	subject := ev.Subject(decl.Subject)
	cons, err := inbox.NewConsumer(db, conn.JS, inbox.Config{
		Name: decl.Name, Stream: ev.StreamName(decl.Subject), FilterSubjects: []string{subject},
		Workers: 2, MaxDeliver: 3, AckWait: 5 * time.Second,
	}, decl.Handle, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(runCtx) }()
	defer func() { stop(); <-done }()

	publish := func(id string, body any) {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		_, err := conn.JS.Publish(ctx, subject, b, jetstream.WithMsgID(id))
		testenv.Must(t, err)
	}
	couponID := c.ID
	paid := events.OrderPaidV1{OrderNo: "ORDER-1", UserID: 7, Amount: 5000, CouponID: &couponID, PaymentNo: "P1", PaidAt: time.Now().UTC()}
	publish("e1", paid)
	publish("e1", paid) // a republish: dropped by the stream or by the inbox
	publish("e2", paid) // the same order under another id: lands, then absorbed
	publish("e3", events.OrderPaidV1{OrderNo: "ORDER-2", UserID: 7, Amount: 100, PaymentNo: "P2"})
	publish("e4", []byte("{not json"))

	// Wait until the inbox has handled all four distinct ids.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var handled, dead int64
		testenv.Must(t, db.Table("processed_message").Count(&handled).Error)
		testenv.Must(t, db.Table("dead_message").Count(&dead).Error)
		if handled+dead >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbox handled %d and buried %d of 4 events", handled, dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var landed []string
	testenv.Must(t, db.Table("coupon_message").Order("message_id").Pluck("message_id", &landed).Error)
	if len(landed) != 2 || landed[0] != "e1" || landed[1] != "e2" {
		t.Fatalf("landed %v, want [e1 e2]", landed)
	}

	// Each delivery deducted at once: no retry pass has run, and none
	// would find anything to do (the messages are settled, and were landed
	// due only after the claim lease).
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "both messages settled on delivery", func() (bool, string) {
		var settled []string
		testenv.Must(t, db.Table("coupon_message").Where("status = ?", "SUCCESS").Order("message_id").Pluck("message_id", &settled).Error)
		return len(settled) == 2, fmt.Sprintf("settled %v, want [e1 e2]: deducted (e1) and absorbed (e2)", settled)
	})
	r, err := a.ProcessDueMessages(ctx)
	testenv.Must(t, err)
	if r.Claimed != 0 {
		t.Fatalf("retry pass = %+v, want nothing left for it", r)
	}
	var ledger int64
	testenv.Must(t, db.Table("coupon_deduction").Where("order_no = ?", "ORDER-1").Count(&ledger).Error)
	if ledger != 1 {
		t.Fatalf("%d ledger rows for ORDER-1, want 1", ledger)
	}
}
