package jobs_test

import (
	"context"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/jobs"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
)

// TestReconcileJobExportsFindings runs the order-reconcile job over a real
// database: a paid order reads 0 for every kind; once its reservation is
// RELEASED behind the use case's back (the units it sold are on sale again,
// to be sold twice), the job reads 1 under
// paid_order_with_unconfirmed_reservation; once the reservation is
// CONFIRMED again, the next run reads 0. The gauge is what the
// OrderReconcileFindings alert of deploy/prometheus/alerts.yml watches.
func TestReconcileJobExportsFindings(t *testing.T) {
	ctx := context.Background()
	env := ordertest.Start(t, nil, assembly.Options{})
	p := env.Product(t, "lamp", 500, 3)
	o := env.PlaceOrder(t, 1, order.Line{ProductID: p, Quantity: 1})
	if paid, err := env.Pay(ctx, o, "P1"); err != nil || !paid {
		t.Fatalf("pay: %v %v", paid, err)
	}
	reconcile := jobs.Reconcile(env.App, "@every 1m", testenv.Logger(t))
	const kind = string(order.AnomalyPaidUnconfirmedStock)
	findings := func() map[string]float64 {
		t.Helper()
		testenv.Must(t, reconcile.Run(ctx))
		return testenv.MetricBy(t, env.Registry, "order_reconcile_findings", "kind")
	}
	total := func(m map[string]float64) (s float64) {
		for _, v := range m {
			s += v
		}
		return s
	}

	if got := findings(); total(got) != 0 || len(got) != len(order.AnomalyKinds) {
		t.Fatalf("after a clean payment: %v, want every kind at 0", got)
	}
	testenv.Must(t, env.DB.Exec("UPDATE stock_reservation SET status = 'RELEASED' WHERE order_no = ?", o.No).Error)
	if got := findings(); got[kind] != 1 || total(got) != 1 {
		t.Fatalf("with the paid order's reservation released: %v, want %s 1 and nothing else", got, kind)
	}
	testenv.Must(t, env.DB.Exec("UPDATE stock_reservation SET status = 'CONFIRMED' WHERE order_no = ?", o.No).Error)
	if got := findings(); total(got) != 0 {
		t.Fatalf("after the repair: %v, want every kind back at 0", got)
	}
}
