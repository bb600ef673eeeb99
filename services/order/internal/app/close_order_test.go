package app_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

// TestCancelReleasesOnce: the owner's cancel closes the charge at the
// payment service, then cancels the order, releases its reservations (the
// units back in stock) and writes one order.cancelled; a second cancel
// answers the cancelled order and changes nothing.
func TestCancelReleasesOnce(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	a, b := env.Product(t, "A", 100, 5), env.Product(t, "B", 200, 5)
	o := env.PlaceOrder(t, 9, order.Line{ProductID: b, Quantity: 2}, order.Line{ProductID: a, Quantity: 3})
	for i := range 2 {
		got, err := env.App.CancelOrder(ctx, 9, o.No)
		if err != nil || got.Status != order.StatusCancelled || got.CancelReason != order.ReasonCustomer || got.CancelledAt == nil {
			t.Fatalf("cancel %d: %+v %v", i+1, got, err)
		}
	}
	if env.Stock(t, a) != 5 || env.Stock(t, b) != 5 || env.Reservations(t, o.No, order.Released) != 2 {
		t.Fatalf("stock %d and %d, %d reservations released; want 5, 5 and 2", env.Stock(t, a), env.Stock(t, b), env.Reservations(t, o.No, order.Released))
	}
	if n := env.Events(t, events.OrderCancelled, o.No); n != 1 {
		t.Fatalf("%d order.cancelled rows, want 1", n)
	}
	if n := env.Payments.Closes(o.No); n != 1 {
		t.Fatalf("%d close calls, want 1 (the second cancel finds the order cancelled)", n)
	}
	if _, err := env.App.CancelOrder(ctx, 10, o.No); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another user's cancel: %v, want ErrNotFound", err)
	}
}

// TestCancelRefusals: a paid order is a conflict; an order whose charge the
// payment service finds paid is a conflict and stays WAIT_PAY with its
// reservations; a payment service that does not answer is ErrUnavailable
// and changes nothing. Nothing is released in any of them.
func TestCancelRefusals(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	p := env.Product(t, "A", 100, 10)
	paid := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	if _, err := env.Pay(ctx, paid, "P1"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.App.CancelOrder(ctx, 1, paid.No); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("cancel a paid order: %v, want ErrConflict", err)
	}
	payingNow := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	env.Payments.SetPaid(payingNow.No)
	if _, err := env.App.CancelOrder(ctx, 1, payingNow.No); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("cancel an order the customer just paid: %v, want ErrConflict", err)
	}
	waiting := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	env.Payments.SetDown(true)
	if _, err := env.App.CancelOrder(ctx, 1, waiting.No); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("cancel with the payment service down: %v, want ErrUnavailable", err)
	}
	for _, no := range []string{payingNow.No, waiting.No} {
		if env.Status(t, no) != order.StatusWaitPay || env.Reservations(t, no, order.Reserved) != 1 {
			t.Fatalf("order %s is %s after a refused cancel", no, env.Status(t, no))
		}
	}
	if env.Reservations(t, paid.No, order.Confirmed) != 1 || env.Stock(t, p) != 7 || env.Count(t, "SELECT COUNT(*) FROM local_message WHERE topic = ?", events.OrderCancelled) != 0 {
		t.Fatalf("a refused cancel changed something: stock %d", env.Stock(t, p))
	}
}

// TestCloseExpiredClosesOnlyExpiredOrders: the order-close pass closes the
// WAIT_PAY orders older than the pay timeout, oldest first and at most
// CloseBatch of them; it leaves younger ones, paid ones, ones whose charge
// turns out paid, and, while the payment service is down, every one (for
// the next pass, which closes them).
func TestCloseExpiredClosesOnlyExpiredOrders(t *testing.T) {
	env := ordertest.Start(t, map[string]string{"ORDER_PAY_TIMEOUT": "1h", "ORDER_CLOSE_BATCH": "3"}, assembly.Options{})
	ctx := context.Background()
	p := env.Product(t, "A", 100, 100)
	age := func(o order.Order, d time.Duration) {
		testenv.Must(t, env.DB.Exec("UPDATE orders SET created_at = ? WHERE order_no = ?", time.Now().UTC().Add(-d), o.No).Error)
	}
	var expired []order.Order
	for i := range 4 {
		o := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
		age(o, time.Hour+time.Duration(4-i)*time.Minute) // oldest first
		expired = append(expired, o)
	}
	young := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	age(young, 59*time.Minute)
	paid := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	age(paid, 2*time.Hour)
	if _, err := env.Pay(ctx, paid, "P-paid"); err != nil {
		t.Fatal(err)
	}
	env.Payments.SetPaid(expired[1].No)

	env.Payments.SetDown(true)
	rep, err := env.App.CloseExpired(ctx)
	if err == nil || rep.Expired != 3 || rep.Failed != 3 || rep.Cancelled != 0 {
		t.Fatalf("pass with the payment service down: %+v %v", rep, err)
	}
	env.Payments.SetDown(false)
	rep, err = env.App.CloseExpired(ctx)
	if err != nil || rep != (app.CloseReport{Expired: 3, Cancelled: 2, Paid: 1}) {
		t.Fatalf("first pass: %+v %v", rep, err)
	}
	if env.Status(t, expired[0].No) != order.StatusCancelled || env.Status(t, expired[1].No) != order.StatusWaitPay ||
		env.Status(t, expired[2].No) != order.StatusCancelled || env.Status(t, expired[3].No) != order.StatusWaitPay {
		t.Fatal("the first pass did not take the three oldest")
	}
	rep, err = env.App.CloseExpired(ctx)
	if err != nil || rep != (app.CloseReport{Expired: 2, Cancelled: 1, Paid: 1}) {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
	if env.Status(t, expired[3].No) != order.StatusCancelled || env.Status(t, young.No) != order.StatusWaitPay || env.Status(t, paid.No) != order.StatusPaid {
		t.Fatal("the second pass closed the wrong orders")
	}
	var reason string
	testenv.Must(t, env.DB.Raw("SELECT cancel_reason FROM orders WHERE order_no = ?", expired[0].No).Row().Scan(&reason))
	if reason != order.ReasonTimeout || env.Events(t, events.OrderCancelled, expired[0].No) != 1 {
		t.Fatalf("closed for %q with %d events", reason, env.Events(t, events.OrderCancelled, expired[0].No))
	}
	if got := env.Stock(t, p); got != 100-3 {
		t.Fatalf("stock %d, want 97 (the young, the paid and the one paid at the platform keep theirs)", got)
	}
}

// TestCloseJobOnTwoReplicas: two replicas run the order-close pass over the
// same 30 expired orders at the same moment (the Redis lock that keeps the
// job to one replica is gone, as it can be). Each order is closed once:
// 30 order.cancelled rows, 60 reservations released once each, the stock
// back exactly. Repeated over several rounds.
func TestCloseJobOnTwoReplicas(t *testing.T) {
	env := ordertest.Start(t, map[string]string{"ORDER_PAY_TIMEOUT": "1m"}, assembly.Options{})
	replicas := []*app.App{env.App, env.Replica(t)}
	ctx := context.Background()
	a, b := env.Product(t, "A", 100, 10_000), env.Product(t, "B", 300, 10_000)
	const perRound = 30
	for round := range 5 {
		var nos []string
		for i := range perRound {
			o := env.PlaceOrder(t, uint64(i+1), order.Line{ProductID: a, Quantity: 1}, order.Line{ProductID: b, Quantity: 2})
			nos = append(nos, o.No)
		}
		testenv.Must(t, env.DB.Exec("UPDATE orders SET created_at = ? WHERE status = 'WAIT_PAY'", time.Now().UTC().Add(-time.Hour)).Error)
		reps := make([]app.CloseReport, len(replicas))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, r := range replicas {
			wg.Go(func() {
				<-start
				var err error
				reps[i], err = r.CloseExpired(ctx)
				if err != nil {
					t.Errorf("replica %d: %v", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if reps[0].Cancelled+reps[1].Cancelled != perRound {
			t.Fatalf("round %d: the replicas cancelled %d and %d, want %d in all", round, reps[0].Cancelled, reps[1].Cancelled, perRound)
		}
		for _, no := range nos {
			if n := env.Events(t, events.OrderCancelled, no); n != 1 {
				t.Fatalf("round %d: order %s has %d order.cancelled rows", round, no, n)
			}
			if n := env.Reservations(t, no, order.Released); n != 2 {
				t.Fatalf("round %d: order %s has %d reservations released", round, no, n)
			}
		}
		if env.Stock(t, a) != 10_000 || env.Stock(t, b) != 10_000 {
			t.Fatalf("round %d: stock %d and %d, want all of it back", round, env.Stock(t, a), env.Stock(t, b))
		}
		t.Logf("round %d: replica 0 cancelled %d, replica 1 %d", round, reps[0].Cancelled, reps[1].Cancelled)
	}
}

// TestCancelRacingPaymentEndsInOne: the owner's cancel (the payment service
// answering "closed", as a platform does when the payment lands a moment
// after its answer) races payment.succeeded for the same order, 100 times.
// Every order ends PAID or CANCELLED, never both effects: PAID with its
// reservation CONFIRMED, the units sold and order.paid only; or CANCELLED
// with it RELEASED, the unit back and order.cancelled only. The loser gets
// order.ErrConflict.
func TestCancelRacingPaymentEndsInOne(t *testing.T) {
	env := ordertest.Start(t, nil, assembly.Options{})
	ctx := context.Background()
	const rounds = 100
	p := env.Product(t, "A", 100, rounds)
	outcomes := map[order.Status]int{}
	for i := range rounds {
		o := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
		var cancelErr, payErr error
		var paid bool
		var wg sync.WaitGroup
		// The payment starts when the payment service is asked to close
		// the charge (at once in even rounds, up to 2 ms later in odd
		// ones), so that it meets the cancel's transaction rather than
		// trailing its HTTP call, and each side wins some rounds.
		closing := make(chan struct{})
		var once sync.Once
		env.Payments.OnClose(func(string) { once.Do(func() { close(closing) }) })
		wg.Go(func() { _, cancelErr = env.App.CancelOrder(ctx, 1, o.No) })
		wg.Go(func() {
			<-closing
			if i%2 == 1 {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
			paid, payErr = env.Pay(ctx, o, "P-"+o.No)
		})
		wg.Wait()
		st := env.Status(t, o.No)
		outcomes[st]++
		paidEvents, cancelledEvents := env.Events(t, events.OrderPaid, o.No), env.Events(t, events.OrderCancelled, o.No)
		switch st {
		case order.StatusPaid:
			if !paid || payErr != nil || !errors.Is(cancelErr, order.ErrConflict) || env.Reservations(t, o.No, order.Confirmed) != 1 || paidEvents != 1 || cancelledEvents != 0 {
				t.Fatalf("round %d PAID: pay %v %v, cancel %v, confirmed %d, events paid %d cancelled %d", i, paid, payErr, cancelErr,
					env.Reservations(t, o.No, order.Confirmed), paidEvents, cancelledEvents)
			}
		case order.StatusCancelled:
			if cancelErr != nil || !errors.Is(payErr, order.ErrConflict) || env.Reservations(t, o.No, order.Released) != 1 || paidEvents != 0 || cancelledEvents != 1 {
				t.Fatalf("round %d CANCELLED: cancel %v, pay %v, released %d, events paid %d cancelled %d", i, cancelErr, payErr,
					env.Reservations(t, o.No, order.Released), paidEvents, cancelledEvents)
			}
		default:
			t.Fatalf("round %d: order %s", i, st)
		}
	}
	// Every unit is sold to a paid order or back on sale.
	if got := env.Stock(t, p); got != rounds-outcomes[order.StatusPaid] {
		t.Fatalf("stock %d after %v, want %d", got, outcomes, rounds-outcomes[order.StatusPaid])
	}
	t.Logf("outcomes over %d races: %v", rounds, outcomes)
	if outcomes[order.StatusPaid] == 0 || outcomes[order.StatusCancelled] == 0 {
		t.Fatalf("outcomes %v: the race never went one of the two ways, so it proved nothing", outcomes)
	}
}
