package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
)

// TestReconcileJobExportsFindings runs the payment-reconcile job over a
// real database. Before any run every kind already reads 0; a payment with
// two payment records (two platform transactions applied to one payment:
// the customer paid twice) reads 1 under multiple_records; once the extra
// record is gone, the next run reads 0 again. The gauge is what the
// PaymentReconcileFindings alert of deploy/prometheus/alerts.yml watches.
func TestReconcileJobExportsFindings(t *testing.T) {
	ctx := context.Background()
	svc := paymenttest.Start(t, paymenttest.Config{})
	a, db, reg := svc.App, svc.DB, svc.Registry
	findings := func() map[string]float64 {
		t.Helper()
		return testenv.MetricBy(t, reg, "payment_reconcile_findings", "kind")
	}
	total := func(m map[string]float64) (s float64) {
		for _, v := range m {
			s += v
		}
		return s
	}
	if got := findings(); len(got) != len(payment.Kinds) || total(got) != 0 {
		t.Fatalf("before the first run: %v, want every kind at 0", got)
	}

	now := time.Now().UTC()
	for _, serial := range []string{"T1", "T2"} {
		testenv.Must(t, db.Exec(`INSERT INTO payment_transaction (channel, platform_serial, out_trade_no, amount, paid_at, created_at)
			VALUES ('psp', ?, 'P1', 4200, ?, ?)`, serial, now, now).Error)
	}
	reconcile := jobs.Reconcile(a, "@every 1m", testenv.Logger(t))
	testenv.Must(t, reconcile.Run(ctx))
	if got := findings(); got["multiple_records"] != 1 || total(got) != 1 {
		t.Fatalf("with two records for P1: %v, want multiple_records 1 and nothing else", got)
	}
	testenv.Must(t, db.Exec(`DELETE FROM payment_transaction WHERE platform_serial = 'T2'`).Error)
	testenv.Must(t, reconcile.Run(ctx))
	if got := findings(); total(got) != 0 {
		t.Fatalf("after the extra record was removed: %v, want every kind back at 0", got)
	}
}
