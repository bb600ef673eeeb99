package messaging_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

type fixture struct {
	*ordertest.Service
	t       *testing.T
	db      *gorm.DB
	nc      *natsjs.Conn
	subject string // payment.succeeded under the test's event prefix
	cons    *inbox.Consumer
}

// newFixture starts the order service, its payment.succeeded consumer
// reading the payment stream of the test's event namespace, and hands the
// test that consumer, as the assembly declared it and the platform built
// it.
func newFixture(t *testing.T) *fixture {
	env := ordertest.Start(t, nil, assembly.Options{})
	return &fixture{Service: env, t: t, db: env.DB, nc: testenv.NATS(t),
		subject: env.Config.Events.Subject(events.PaymentSucceeded), cons: env.Consumer(t, app.PaymentSucceededConsumer)}
}

// createOrder places an order of one unit of a new product priced amount
// cents and returns its number.
func (f *fixture) createOrder(amount int64) string {
	p := f.Product(f.t, fmt.Sprintf("P-%d-%d", amount, f.Count(f.t, "SELECT COUNT(*) FROM products")), amount, 10)
	return f.PlaceOrder(f.t, 1, order.Line{ProductID: p, Quantity: 1}).No
}

func payment(orderNo, paymentNo string, amount int64) []byte {
	b, _ := json.Marshal(events.PaymentSucceededV1{PaymentNo: paymentNo, OrderNo: orderNo, Amount: amount, Channel: "sim", PlatformSerial: "S-" + paymentNo, PaidAt: time.Now().UTC()})
	return b
}

func (f *fixture) count(q string, args ...any) int64 {
	var n int64
	testenv.Must(f.t, f.db.Raw(q, args...).Row().Scan(&n))
	return n
}

func (f *fixture) status(orderNo string) (status, paymentNo string) {
	var p *string
	testenv.Must(f.t, f.db.Raw("SELECT status, payment_no FROM orders WHERE order_no = ?", orderNo).Row().Scan(&status, &p))
	if p != nil {
		paymentNo = *p
	}
	return
}

func (f *fixture) paidEvents(orderNo string) int64 {
	return f.count("SELECT COUNT(*) FROM local_message WHERE topic = ? AND body LIKE ?", events.OrderPaid, "%"+orderNo+"%")
}

// The same payment.succeeded delivered 50 times at once: the order is PAID
// once, one order.paid event, 49 duplicates acked without effect.
func TestPaymentSucceededFiftyConcurrentDeliveries(t *testing.T) {
	f := newFixture(t)
	no := f.createOrder(1000)
	msg := inbox.Message{ID: "pay-msg-1", Subject: f.subject, Body: payment(no, "P1", 1000)}
	var wg sync.WaitGroup
	outcomes := make(chan inbox.Outcome, 50)
	start := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-start
			out, err := f.cons.Process(context.Background(), msg)
			if err != nil {
				t.Errorf("delivery failed: %s %v", out, err)
			}
			outcomes <- out
		})
	}
	close(start)
	wg.Wait()
	close(outcomes)
	counts := map[inbox.Outcome]int{}
	for o := range outcomes {
		counts[o]++
	}
	if counts[inbox.Processed] != 1 || counts[inbox.Duplicate] != 49 {
		t.Fatalf("outcomes %v, want 1 processed and 49 duplicates", counts)
	}
	if st, p := f.status(no); st != "PAID" || p != "P1" {
		t.Fatalf("order %s by %q, want PAID by P1", st, p)
	}
	if n := f.paidEvents(no); n != 1 {
		t.Fatalf("%d order.paid events, want 1", n)
	}
	if n := f.Reservations(t, no, order.Confirmed); n != 1 {
		t.Fatalf("%d reservations CONFIRMED, want 1", n)
	}
}

// Distinct messages for the same payment (the payment service emitted
// twice, say), racing: all are processed, but only one pays the order and
// writes order.paid; the others find it PAID by the same payment, through
// the early read or the re-read after an update that changed no row.
func TestTwoMessagesForOnePaymentPayOnce(t *testing.T) {
	f := newFixture(t)
	no := f.createOrder(1000)
	const messages = 20
	var wg sync.WaitGroup
	for i := range messages {
		wg.Go(func() {
			out, err := f.cons.Process(context.Background(), inbox.Message{ID: fmt.Sprintf("pay-msg-%d", i), Subject: f.subject, Body: payment(no, "P1", 1000)})
			if err != nil || out != inbox.Processed {
				t.Errorf("message %d: %s %v", i, out, err)
			}
		})
	}
	wg.Wait()
	if st, _ := f.status(no); st != "PAID" {
		t.Fatalf("order %s, want PAID", st)
	}
	if n := f.paidEvents(no); n != 1 {
		t.Fatalf("%d order.paid events, want 1", n)
	}
	if n := f.count("SELECT COUNT(*) FROM processed_message"); n != messages {
		t.Fatalf("%d processed rows, want %d", n, messages)
	}
}

// Payments the order cannot take are permanent conflicts: dead-lettered
// with the reason, the order untouched, no event.
func TestConflictingPaymentsAreDead(t *testing.T) {
	f := newFixture(t)
	paidNo := f.createOrder(1000)
	if out, err := f.cons.Process(context.Background(), inbox.Message{ID: "m-ok", Body: payment(paidNo, "P1", 1000)}); out != inbox.Processed {
		t.Fatalf("first payment: %s %v", out, err)
	}
	otherNo := f.createOrder(500)
	if _, err := f.App.CancelOrder(context.Background(), 1, otherNo); err != nil {
		t.Fatal(err)
	}
	waitingNo := f.createOrder(700)
	cases := []struct {
		id, orderNo, paymentNo string
		amount                 int64
		reason                 string
	}{
		{"m-other-payment", paidNo, "P2", 1000, "conflict"},
		{"m-cancelled", otherNo, "P3", 500, "conflict"},
		{"m-amount", waitingNo, "P4", 701, "amount"},
		{"m-unknown", "O-NOPE", "P5", 1, "not found"},
	}
	for _, c := range cases {
		out, _ := f.cons.Process(context.Background(), inbox.Message{ID: c.id, Body: payment(c.orderNo, c.paymentNo, c.amount)})
		if out != inbox.Dead {
			t.Errorf("%s: outcome %s, want dead", c.id, out)
		}
		if n := f.count("SELECT COUNT(*) FROM dead_message WHERE message_id = ? AND reason LIKE ?", c.id, "%"+c.reason+"%"); n != 1 {
			t.Errorf("%s: no dead row mentioning %q", c.id, c.reason)
		}
	}
	if out, _ := f.cons.Process(context.Background(), inbox.Message{ID: "m-garbage", Body: []byte("{")}); out != inbox.Dead {
		t.Errorf("undecodable payment event: %s, want dead", out)
	}
	if st, p := f.status(paidNo); st != "PAID" || p != "P1" {
		t.Fatalf("paid order now %s by %s", st, p)
	}
	if st, _ := f.status(otherNo); st != "CANCELLED" || f.Reservations(t, otherNo, order.Released) != 1 {
		t.Fatalf("cancelled order now %s, its reservation not RELEASED", st)
	}
	if f.Reservations(t, waitingNo, order.Reserved) != 1 {
		t.Fatal("the reservation of the order with the wrong amount moved")
	}
	if st, _ := f.status(waitingNo); st != "WAIT_PAY" {
		t.Fatalf("order with the wrong amount now %s", st)
	}
	if n := f.count("SELECT COUNT(*) FROM local_message WHERE topic = ?", events.OrderPaid); n != 1 {
		t.Fatalf("%d order.paid events, want only the first payment's", n)
	}
}

// Over JetStream: payment.succeeded published twice, as two messages, is
// consumed by the service's running consumer; the order is paid once and exactly one
// order.paid row is written to the outbox. (Publishing order.paid itself is
// the relay's job, tested in pkg/outbox.)
func TestPaymentSucceededThroughStreamPublishesOrderPaid(t *testing.T) {
	f := newFixture(t)
	no := f.createOrder(1234)
	for i := range 2 {
		m := nats.NewMsg(f.subject)
		m.Data = payment(no, "P9", 1234)
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("pay-%d", i))
		_, err := f.nc.JS.PublishMsg(context.Background(), m)
		testenv.Must(t, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.count("SELECT COUNT(*) FROM processed_message") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("payment events not consumed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, p := f.status(no); st != "PAID" || p != "P9" {
		t.Fatalf("order %s by %s", st, p)
	}
	if n := f.paidEvents(no); n != 1 {
		t.Fatalf("%d order.paid rows, want 1", n)
	}
}
