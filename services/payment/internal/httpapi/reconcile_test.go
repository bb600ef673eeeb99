package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

type reconcileJSON struct {
	Empty  bool `json:"empty"`
	Report struct {
		MultipleRecords []struct {
			OutTradeNo string `json:"out_trade_no"`
			Records    int    `json:"records"`
		} `json:"multiple_records"`
		MissingEvents    []string `json:"missing_events"`
		AmountMismatches []struct {
			OutTradeNo string `json:"out_trade_no"`
			Expected   int64  `json:"expected"`
			Recorded   int64  `json:"recorded"`
		} `json:"amount_mismatches"`
		PaidCancelled []string `json:"paid_cancelled_without_refund"`
		LateRefunds   []struct {
			RefundNo string `json:"refund_no"`
			Status   string `json:"status"`
		} `json:"late_refunds"`
		StaleWaitPay        []string `json:"stale_wait_pay"`
		MissingRefundEvents []string `json:"missing_refund_events"`
	} `json:"report"`
}

func (f *fixture) reconcile() reconcileJSON {
	f.t.Helper()
	status, body := f.get("/admin/reconcile", http.Header{"Authorization": {"Bearer " + paymenttest.AdminToken}})
	if status != http.StatusOK {
		f.t.Fatalf("reconcile: %d %s", status, body)
	}
	var r reconcileJSON
	if err := json.Unmarshal(body, &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

// TestReconcileFindsWhatTheBrokenHandlerLeaves: after a storm and a wrong
// amount on the broken handler, and a paid payment without its event, the
// report lists each; after the same on the fixed handler it is empty.
func TestReconcileFindsWhatTheBrokenHandlerLeaves(t *testing.T) {
	t.Run("broken", func(t *testing.T) {
		f := newFixture(t, variant.Broken)
		if status, _ := f.get("/admin/reconcile", nil); status != http.StatusUnauthorized {
			t.Fatalf("without the admin token: %d, want 401", status)
		}
		// Storms until one payment is recorded twice (usually the first).
		var stormed string
		for i := 0; i < 5 && stormed == ""; i++ {
			no := f.payment()
			f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 50})
			if e := f.effects(no); e.Records > 1 {
				stormed = no
			}
		}
		if stormed == "" {
			t.Fatal("five storms never raced on the broken handler")
		}
		mismatched, silent := f.payment(), f.payment()
		f.charge(mismatched, 4200, &pspsim.Plan{Mode: pspsim.ModeWrongAmount})
		// A payment set PAID behind the handler's back: no event exists.
		if err := f.svc.DB.Exec("UPDATE payments SET status = 'PAID', paid_at = ? WHERE out_trade_no = ?", time.Now().UTC(), silent).Error; err != nil {
			t.Fatal(err)
		}
		r := f.reconcile()
		if r.Empty || len(r.Report.MultipleRecords) != 1 || r.Report.MultipleRecords[0].OutTradeNo != stormed || r.Report.MultipleRecords[0].Records < 2 {
			t.Fatalf("multiple records: %+v", r.Report.MultipleRecords)
		}
		if len(r.Report.AmountMismatches) != 1 || r.Report.AmountMismatches[0].OutTradeNo != mismatched || r.Report.AmountMismatches[0].Recorded != 4201 {
			t.Fatalf("amount mismatches: %+v", r.Report.AmountMismatches)
		}
		if len(r.Report.MissingEvents) != 1 || r.Report.MissingEvents[0] != silent {
			t.Fatalf("missing events: %+v", r.Report.MissingEvents)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		f := newFixture(t, variant.Fixed)
		stormed, mismatched := f.payment(), f.payment()
		f.charge(stormed, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 30, Replays: 5})
		f.charge(mismatched, 4200, &pspsim.Plan{Mode: pspsim.ModeWrongAmount})
		if r := f.reconcile(); !r.Empty {
			t.Fatalf("fixed handler leaves findings: %+v", r.Report)
		}
		if e, _ := paymentlab.CountEffects(context.Background(), f.svc.DB, stormed); e.Status != "PAID" {
			t.Fatalf("stormed payment not paid: %+v", e)
		}
		// The fixed handler's event is found by its message number, before
		// any body is read: with a body that no longer names the payment it
		// still counts (the body match alone reads every event per payment,
		// seconds at a few thousand payments).
		if err := f.svc.DB.Exec("UPDATE local_message SET body = '{}' WHERE message_no = ?", "payment-succeeded-"+stormed).Error; err != nil {
			t.Fatal(err)
		}
		if r := f.reconcile(); !r.Empty {
			t.Fatalf("the event payment-succeeded-%s was not found by its number: %+v", stormed, r.Report)
		}
	})
}

// TestReconcileFindsWhatAClosedOrderCanLeave: each anomaly of the close and
// refund paths, made by hand where the fixed code never makes it, is
// reported under its kind and counted in payment_reconcile_findings; a
// refunded payment and a refund recently requested are not.
func TestReconcileFindsWhatAClosedOrderCanLeave(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	db := f.svc.DB
	now := time.Now().UTC()

	// A payment kept although its order was cancelled (a close that never
	// asked this service): PAID, the cancellation recorded, no refund.
	kept := f.payment()
	f.charge(kept, 4200, nil)
	testenv.Must(t, db.Exec("UPDATE payments SET order_cancelled_at = ?, cancel_reason = 'timeout' WHERE out_trade_no = ?", now, kept).Error)
	// A refunded payment whose payment.refunded row is gone.
	refunded := f.payment()
	f.closedThenPaid(refunded, 1)
	if rep, err := f.svc.App.SendRefunds(context.Background()); err != nil || rep.Sent != 1 {
		t.Fatalf("send refunds: %+v %v", rep, err)
	}
	f.waitSim()
	testenv.Must(t, db.Exec("DELETE FROM local_message WHERE topic = ? AND CONVERT(body USING utf8mb4) LIKE ?", events.PaymentRefunded, "%"+refunded+"%").Error)
	// A refund the platform never confirmed, written an hour ago, and one
	// written just now (not late yet); neither is sent.
	late, recent := f.payment(), f.payment()
	f.closedThenPaid(late, 1)
	f.closedThenPaid(recent, 1)
	testenv.Must(t, db.Exec("UPDATE refund SET created_at = ? WHERE out_trade_no = ?", now.Add(-time.Hour), late).Error)
	// A payment waiting for two hours: past the query horizon.
	stale := f.payment()
	testenv.Must(t, db.Exec("UPDATE payments SET created_at = ? WHERE out_trade_no = ?", now.Add(-2*time.Hour), stale).Error)

	r := f.reconcile()
	switch {
	case r.Empty:
		t.Fatal("empty report")
	case len(r.Report.PaidCancelled) != 1 || r.Report.PaidCancelled[0] != kept:
		t.Fatalf("paid payments of cancelled orders: %v, want %s", r.Report.PaidCancelled, kept)
	case len(r.Report.LateRefunds) != 1 || r.Report.LateRefunds[0].RefundNo != payment.RefundNoFor(late):
		t.Fatalf("late refunds: %+v, want %s's", r.Report.LateRefunds, late)
	case len(r.Report.StaleWaitPay) != 1 || r.Report.StaleWaitPay[0] != stale:
		t.Fatalf("stale waiting payments: %v, want %s", r.Report.StaleWaitPay, stale)
	case len(r.Report.MissingRefundEvents) != 1 || r.Report.MissingRefundEvents[0] != refunded:
		t.Fatalf("refunded without payment.refunded: %v, want %s", r.Report.MissingRefundEvents, refunded)
	case len(r.Report.MultipleRecords)+len(r.Report.MissingEvents)+len(r.Report.AmountMismatches) != 0:
		t.Fatalf("incident 2 findings: %+v", r.Report)
	}
	want := `
# HELP payment_reconcile_findings Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches, paid_cancelled_without_refund, late_refunds, stale_wait_pay, missing_refund_events.
# TYPE payment_reconcile_findings gauge
payment_reconcile_findings{kind="amount_mismatches"} 0
payment_reconcile_findings{kind="late_refunds"} 1
payment_reconcile_findings{kind="missing_events"} 0
payment_reconcile_findings{kind="missing_refund_events"} 1
payment_reconcile_findings{kind="multiple_records"} 0
payment_reconcile_findings{kind="paid_cancelled_without_refund"} 1
payment_reconcile_findings{kind="stale_wait_pay"} 1
`
	if err := testutil.GatherAndCompare(f.svc.Registry, strings.NewReader(want), "payment_reconcile_findings"); err != nil {
		t.Fatal(err)
	}
}
