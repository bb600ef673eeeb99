package jobs_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// TestReconcileJobExportsDuplicateDeduction runs the coupon-reconcile job
// over a real database: a clean deduction reads 0 for every kind; a second
// ledger row for the same order (incident 1's duplicate effect, written on
// the incident's schema, which has no per-order key to refuse it) reads 1
// under order_deducted_more_than_once; once the extra row is removed, the
// next run reads 0 again. The gauge is what the CouponDuplicateEffect alert
// of deploy/prometheus/alerts.yml watches.
func TestReconcileJobExportsDuplicateDeduction(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations, labmigrations.Source)
	reg := prometheus.NewRegistry()
	p, err := assembly.UseCases(db, coupontest.Settings(t, nil), assembly.Options{Orders: unreachable{}}, testenv.Logger(t), reg, nil)
	testenv.Must(t, err)
	a, st := p.App, p.Store
	tpl, err := a.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	c, err := a.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	_, err = a.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "O1", UserID: 7, OrderAmount: 100})
	testenv.Must(t, err)
	testenv.Must(t, st.InTx(ctx, func(tx coupon.Tx) error {
		return a.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: "m1", OrderNo: "O1", UserID: 7, CouponID: c.ID})
	}))
	testenv.Must(t, jobs.RetryPass(a, "@every 2s", testenv.Logger(t)).Run(ctx))

	reconcile := jobs.Reconcile(a, "@every 1m", testenv.Logger(t))
	const dup = string(coupon.AnomalyDuplicateDeduction)
	testenv.Must(t, reconcile.Run(ctx))
	if got := gauges(t, reg, "coupon_reconcile_findings"); sum(got) != 0 || len(got) != len(coupon.AnomalyKinds) {
		t.Fatalf("after one clean deduction: %v, want every kind at 0", got)
	}

	testenv.Must(t, db.Exec(`INSERT INTO coupon_deduction (order_no, coupon_id, user_id, amount, message_id, created_at)
		SELECT order_no, coupon_id, user_id, amount, 'm1-again', created_at FROM coupon_deduction WHERE order_no = 'O1'`).Error)
	testenv.Must(t, reconcile.Run(ctx))
	if got := gauges(t, reg, "coupon_reconcile_findings"); got[dup] != 1 || sum(got) != 1 {
		t.Fatalf("with two ledger rows for O1: %v, want %s 1 and nothing else", got, dup)
	}

	testenv.Must(t, db.Exec(`DELETE FROM coupon_deduction WHERE message_id = 'm1-again'`).Error)
	testenv.Must(t, reconcile.Run(ctx))
	if got := gauges(t, reg, "coupon_reconcile_findings"); sum(got) != 0 {
		t.Fatalf("after the extra row was removed: %v, want every kind back at 0", got)
	}
}

// gauges returns the series of the gauge name on reg by their first label's
// value.
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	testenv.Must(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
