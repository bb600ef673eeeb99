package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// queries returns payment_queries_total{answer}.
func (f *fixture) queries(answer string) float64 {
	f.t.Helper()
	mfs, err := f.svc.Registry.Gather()
	testenv.Must(f.t, err)
	for _, mf := range mfs {
		if mf.GetName() != "payment_queries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == answer {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSilentPlatformIsFoundPaidByTheQuery: the platform takes the customer's
// money and never notifies (PSP_MODE=silent). The payment-query job asks
// about the payment once it has waited PAYMENT_QUERY_AFTER, and applies the
// paid answer through the notification's path: PAID, one record, one
// payment.succeeded. A payment the platform never saw is asked about and
// left waiting; one past the query horizon is left to the reconciler.
func TestSilentPlatformIsFoundPaidByTheQuery(t *testing.T) {
	orders := newOrderService(t, map[string]testOrder{"O-silent": {UserID: 7, PayAmount: 1200, Status: "WAIT_PAY"}})
	simCfg := paymentlab.SimulatorConfig()
	simCfg.Mode = pspsim.ModeSilent
	f := buildFixtureWithSimulator(t, paymenttest.Config{Vars: map[string]string{"ORDER_URL": orders.URL,
		"PAYMENT_QUERY_AFTER": "300ms", "PAYMENT_QUERY_HORIZON": "1h"}}, simCfg)
	ctx := context.Background()

	if status, body := f.payAs(7, "O-silent"); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	p := f.paymentOf("O-silent")
	f.waitSim()
	if rep, err := f.svc.App.QueryPayments(ctx); err != nil || rep.Asked != 0 {
		t.Fatalf("a query before PAYMENT_QUERY_AFTER: %+v %v, want nothing asked", rep, err)
	}
	time.Sleep(350 * time.Millisecond)
	if e := f.effects(p.OutTradeNo); e.Status != "WAIT_PAY" || e.Records != 0 {
		t.Fatalf("the silent platform notified: %+v", e)
	}
	rep, err := f.svc.App.QueryPayments(ctx)
	if err != nil || rep.Asked != 1 || rep.Paid != 1 {
		t.Fatalf("query: %+v %v, want one payment asked and found paid", rep, err)
	}
	if e := f.effects(p.OutTradeNo); e.Status != "PAID" || e.Records != 1 || e.Events != 1 {
		t.Fatalf("after the query: %+v, want PAID with one record and one payment.succeeded", e)
	}
	if rep, err := f.svc.App.QueryPayments(ctx); err != nil || rep.Asked != 0 {
		t.Fatalf("a query after the payment: %+v %v, want nothing asked", rep, err)
	}

	// Never charged: the platform does not know it; it stays WAIT_PAY.
	unknown := f.payment()
	testenv.Must(t, f.svc.DB.Exec("UPDATE payments SET created_at = ? WHERE out_trade_no = ?", time.Now().UTC().Add(-time.Minute), unknown).Error)
	if rep, err := f.svc.App.QueryPayments(ctx); err != nil || rep.Asked != 1 || rep.Paid != 0 {
		t.Fatalf("query of an unknown charge: %+v %v", rep, err)
	}
	var queried *time.Time
	testenv.Must(t, f.svc.DB.Raw("SELECT queried_at FROM payments WHERE out_trade_no = ?", unknown).Scan(&queried).Error)
	if e := f.effects(unknown); e.Status != "WAIT_PAY" || queried == nil {
		t.Fatalf("unknown charge: %+v, queried at %v; want WAIT_PAY, queried", e, queried)
	}
	// Past the horizon: no longer asked, and reported.
	testenv.Must(t, f.svc.DB.Exec("UPDATE payments SET created_at = ? WHERE out_trade_no = ?", time.Now().UTC().Add(-2*time.Hour), unknown).Error)
	if rep, _ := f.svc.App.QueryPayments(ctx); rep.Asked != 0 {
		t.Fatalf("a payment past the horizon was asked about: %+v", rep)
	}
	if r := f.reconcile(); len(r.Report.StaleWaitPay) != 1 || r.Report.StaleWaitPay[0] != unknown {
		t.Fatalf("stale waiting payments: %v, want %s", r.Report.StaleWaitPay, unknown)
	}
	if got, unknownAnswers := f.queries("paid"), f.queries("unknown"); got != 1 || unknownAnswers != 1 {
		t.Fatalf("payment_queries_total: paid %v, unknown %v; want 1 and 1", got, unknownAnswers)
	}
}

// TestQueryRacesALateNotification: the query's paid answer and the
// notification arrive together (ten copies of it, four queries), many
// times; each payment ends with one record and one payment.succeeded.
func TestQueryRacesALateNotification(t *testing.T) {
	f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PAYMENT_QUERY_AFTER": "100ms", "PAYMENT_QUERY_HORIZON": "1h"}})
	ctx := context.Background()
	const iterations = 30
	for i := range iterations {
		no := f.payment()
		testenv.Must(t, f.svc.DB.Exec("UPDATE payments SET created_at = ? WHERE out_trade_no = ?", time.Now().UTC().Add(-time.Second), no).Error)
		f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeHold, Copies: 10})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; testenv.Must(t, f.sim.Deliver(no)) })
		for range 4 {
			wg.Go(func() {
				<-start
				if _, err := f.svc.App.QueryPayments(ctx); err != nil {
					t.Errorf("iteration %d: query: %v", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		f.waitSim()
		if e := f.effects(no); e.Status != string(payment.StatusPaid) || e.Records != 1 || e.Events != 1 {
			t.Fatalf("iteration %d: %+v, want PAID with one record and one event", i, e)
		}
	}
	t.Logf("over %d races: %v notifications processed, %v queries found a payment paid", iterations, f.callbacks("fixed", "processed"), f.queries("paid"))
}
