package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// TestCloseAnswersByThePaymentsState: POST /internal/orders/:no/close for
// each state a payment can be in, against the simulator as the platform,
// answers what the page promises and leaves the payment where it says.
func TestCloseAnswersByThePaymentsState(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{"O-unpaid": {UserID: 7, PayAmount: 500, Status: "WAIT_PAY"}})
	f := newFixtureWithPlatform(t, orders.URL)

	t.Run("no payment yet: a CLOSED placeholder, and no payment can follow", func(t *testing.T) {
		if status, out := f.closeOrder("O-unpaid"); status != http.StatusOK || out != "closed" {
			t.Fatalf("close: %d %q, want 200 closed", status, out)
		}
		if p := f.paymentOf("O-unpaid"); p.Status != payment.StatusClosed || p.Amount != 0 {
			t.Fatalf("placeholder %+v, want CLOSED", p)
		}
		if status, body := f.payAs(7, "O-unpaid"); status != http.StatusConflict {
			t.Fatalf("paying after the close: %d %s, want 409", status, body)
		}
		if status, out := f.closeOrder("O-unpaid"); status != http.StatusOK || out != "closed" {
			t.Fatalf("second close: %d %q", status, out)
		}
	})
	t.Run("waiting, paid at the platform: applied as the notification would, and the order is paid", func(t *testing.T) {
		no := f.payment()
		f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeHold, Copies: 5})
		if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "paid" {
			t.Fatalf("close: %d %q, want 200 paid", status, out)
		}
		if e := f.effects(no); e.Status != "PAID" || e.Records != 1 || e.Events != 1 || e.Refunds != 0 {
			t.Fatalf("after the close: %+v, want PAID with 1 record and 1 event", e)
		}
		// The held notification arrives after all: five copies, duplicates.
		testenv.Must(t, f.sim.Deliver(no))
		f.waitSim()
		if e := f.effects(no); e.Status != "PAID" || e.Records != 1 || e.Events != 1 {
			t.Fatalf("after the notification: %+v, want it a duplicate", e)
		}
		if got := f.callbacks("fixed", "duplicate"); got != 5 {
			t.Fatalf("%v duplicate notifications, want the 5 copies", got)
		}
		if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "paid" {
			t.Fatalf("close of a paid payment: %d %q, want 200 paid", status, out)
		}
	})
	t.Run("waiting, never charged: closed, and the platform refuses a late charge", func(t *testing.T) {
		no := f.payment()
		if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "closed" {
			t.Fatalf("close: %d %q, want 200 closed", status, out)
		}
		if e := f.effects(no); e.Status != "CLOSED" {
			t.Fatalf("after the close: %+v, want CLOSED", e)
		}
		_, err := f.psp.Charge(context.Background(), psp.ChargeRequest{OutTradeNo: no, Amount: 4200, NotifyURL: f.callbackURL})
		if !errors.Is(err, psp.ErrChargeClosed) {
			t.Fatalf("a charge after the close: %v, want psp.ErrChargeClosed", err)
		}
	})
	t.Run("waiting, the platform answers closed although paid: CLOSED", func(t *testing.T) {
		no := f.payment()
		f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeCloseRace})
		if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "closed" {
			t.Fatalf("close: %d %q, want 200 closed", status, out)
		}
		if e := f.effects(no); e.Status != "CLOSED" || e.Records != 0 {
			t.Fatalf("after the close: %+v, want CLOSED without a record", e)
		}
	})
	t.Run("refunding: closed", func(t *testing.T) {
		no := f.payment()
		testenv.Must(t, f.svc.DB.Exec("UPDATE payments SET status = 'REFUNDING' WHERE out_trade_no = ?", no).Error)
		if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "closed" {
			t.Fatalf("close: %d %q, want 200 closed", status, out)
		}
	})
	t.Run("only services may close", func(t *testing.T) {
		before := f.snapshot()
		for name, h := range map[string]http.Header{
			"no token":          nil,
			"the admin token":   {"Authorization": {"Bearer " + paymenttest.AdminToken}},
			"a user's identity": owner(7),
		} {
			req, _ := http.NewRequest(http.MethodPost, f.svc.URL+"/internal/orders/O-other/close", nil)
			req.Header = h
			status, hdr, body := f.doFull(req)
			if status != http.StatusUnauthorized || !isProblem(hdr) {
				t.Fatalf("%s: %d %s, want 401 problem+json", name, status, body)
			}
		}
		if after := f.snapshot(); !reflect.DeepEqual(before, after) {
			t.Fatalf("a refused close changed the tables:\nbefore %+v\nafter  %+v", before, after)
		}
	})
}

// TestCloseWhenThePlatformDoesNotAnswer: the order must not close, so the
// close fails (502) and the payment stays WAIT_PAY for the next try.
func TestCloseWhenThePlatformDoesNotAnswer(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "platform maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PSP_URL": down.URL}})
	no := f.payment()
	before := f.snapshot()
	req, _ := http.NewRequest(http.MethodPost, f.svc.URL+"/internal/orders/O"+no+"/close", nil)
	req.Header.Set("Authorization", "Bearer "+paymenttest.InternalToken)
	if status, hdr, body := f.doFull(req); status != http.StatusBadGateway || !isProblem(hdr) {
		t.Fatalf("close: %d %s, want 502 problem+json", status, body)
	}
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("a failed close changed the tables:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestCloseRacesPOSTPayments races the order service's close against the
// customer's POST /payments for the same order, many times. Whoever is
// first, the outcome is consistent: a close answered "closed" leaves a
// closed payment (placeholder or CLOSED) and no payment.succeeded, and the
// create is refused; a close answered "paid" leaves one PAID payment with one
// record and one event. Never a WAIT_PAY payment on a closed order.
func TestCloseRacesPOSTPayments(t *testing.T) {
	orders := newOrderService(t, nil)
	f := newFixtureWithPlatform(t, orders.URL)
	const iterations = 60
	seen := map[string]int{}
	for i := range iterations {
		orderNo := fmt.Sprintf("O-race-%d-%s", i, testenv.RandomSuffix(6))
		orders.set(orderNo, testOrder{UserID: 7, PayAmount: 900, Status: "WAIT_PAY"})
		var (
			wg                      sync.WaitGroup
			start                   = make(chan struct{})
			createStatus, closeCode int
			outcome                 string
		)
		wg.Go(func() { <-start; createStatus, _ = f.payAs(7, orderNo) })
		// The create makes a call to the order service before its insert, so
		// a close released at the same instant is nearly always first; a
		// delay growing over the iterations lets the create win some of
		// the races, before and after its charge reaches the platform.
		delay := time.Duration(i%12) * 400 * time.Microsecond
		wg.Go(func() { <-start; time.Sleep(delay); closeCode, outcome = f.closeOrder(orderNo) })
		close(start)
		wg.Wait()
		f.waitSim()
		if closeCode != http.StatusOK {
			t.Fatalf("iteration %d: close answered %d", i, closeCode)
		}
		p := f.paymentOf(orderNo)
		e := f.effects(p.OutTradeNo)
		switch outcome {
		case "closed":
			if !p.Closed() || e.Events != 0 || createStatus != http.StatusConflict {
				t.Fatalf("iteration %d: close answered closed, but the payment is %s with %d payment.succeeded, and the create answered %d",
					i, p.Status, e.Events, createStatus)
			}
			if p.Amount == 0 {
				seen["placeholder first"]++
			} else {
				seen["payment first, charge closed"]++
			}
		case "paid":
			if p.Status != payment.StatusPaid || e.Records != 1 || e.Events != 1 || createStatus/100 != 2 {
				t.Fatalf("iteration %d: close answered paid, but the payment is %s with %d records and %d events, and the create answered %d",
					i, p.Status, e.Records, e.Events, createStatus)
			}
			seen["payment first, paid"]++
		default:
			t.Fatalf("iteration %d: outcome %q", i, outcome)
		}
	}
	t.Logf("orderings over %d races: %v", iterations, seen)
	var waiting int64
	testenv.Must(t, f.svc.DB.Raw("SELECT COUNT(*) FROM payments WHERE status = 'WAIT_PAY'").Scan(&waiting).Error)
	if waiting != 0 {
		t.Fatalf("%d payments left WAIT_PAY", waiting)
	}
}

// TestCloseRacesAPaymentAtThePlatform races the close against the
// customer's payment landing, many times, in both ways a platform lets them
// cross: a notification in flight while the platform knows the charge is
// paid (it answers the close "paid"), and the platform's own race
// (close_race: it answers "closed" although the charge is paid, and the
// held notification is released at the same moment). Every iteration ends
// consistent: "paid" → PAID, one record, one payment.succeeded, no refund;
// "closed" → REFUNDING, one record, one refund, no payment.succeeded.
func TestCloseRacesAPaymentAtThePlatform(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	for _, mode := range []string{pspsim.ModeHold, pspsim.ModeCloseRace} {
		t.Run(mode, func(t *testing.T) {
			const iterations = 40
			seen := map[string]int{}
			for i := range iterations {
				no := f.payment()
				f.charge(no, 4200, &pspsim.Plan{Mode: mode, Copies: 3})
				var (
					wg      sync.WaitGroup
					start   = make(chan struct{})
					code    int
					outcome string
				)
				wg.Go(func() { <-start; code, outcome = f.closeOrder("O" + no) })
				wg.Go(func() { <-start; testenv.Must(t, f.sim.Deliver(no)) })
				close(start)
				wg.Wait()
				f.waitSim()
				e := f.effects(no)
				switch {
				case code != http.StatusOK:
					t.Fatalf("iteration %d: close answered %d", i, code)
				case outcome == "paid" && (e.Status != "PAID" || e.Records != 1 || e.Events != 1 || e.Refunds != 0):
					t.Fatalf("iteration %d: close answered paid, effects %+v", i, e)
				case outcome == "closed" && (e.Status != "REFUNDING" || e.Records != 1 || e.Events != 0 || e.Refunds != 1):
					t.Fatalf("iteration %d: close answered closed, effects %+v", i, e)
				case mode == pspsim.ModeHold && outcome != "paid":
					t.Fatalf("iteration %d: the platform knew the charge paid, the close answered %q", i, outcome)
				}
				seen[outcome]++
			}
			t.Logf("%s: outcomes over %d races: %v", mode, iterations, seen)
		})
	}
}
