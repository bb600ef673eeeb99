package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// TestRetryPassJobDeducts runs one pass of the retry job as the platform's
// cron would: it deducts a landed message, and a second pass finds nothing
// due. (Scheduling, the Redis lock, overlap and recovery are the platform's,
// proven in pkg/platform/jobs_test.go.)
func TestRetryPassJobDeducts(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	p, err := assembly.UseCases(db, coupontest.Settings(t, nil), assembly.Options{Orders: unreachable{}}, testenv.Logger(t), prometheus.NewRegistry(), nil)
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
	status := func() string {
		var s string
		testenv.Must(t, db.Table("coupon_message").Where("message_id = ?", "m1").Pluck("status", &s).Error)
		return s
	}

	retry := jobs.RetryPass(a, "@every 2s", testenv.Logger(t))
	if retry.Name == "" || retry.Schedule != "@every 2s" || retry.EveryReplica {
		t.Fatalf("retry job %+v: want a named job on the given schedule, on one replica at a time", retry)
	}
	testenv.Must(t, retry.Run(ctx))
	if s := status(); s != string(coupon.MessageSuccess) {
		t.Fatalf("after one retry pass the message is %s, want SUCCESS", s)
	}
	testenv.Must(t, retry.Run(ctx))
	var ledger int64
	testenv.Must(t, db.Table("coupon_deduction").Where("order_no = ?", "O1").Count(&ledger).Error)
	if ledger != 1 {
		t.Fatalf("%d ledger rows after two passes, want 1", ledger)
	}
}

// unreachable is an order service that cannot be reached.
type unreachable struct{}

func (unreachable) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", coupon.ErrOrderServiceUnavailable
}

// cancelledOrders answers every order CANCELLED.
type cancelledOrders struct{}

func (cancelledOrders) OrderState(context.Context, string) (coupon.OrderState, error) {
	return coupon.OrderCancelled, nil
}

// TestSweepAndReconcileJobs runs one pass of the coupon-sweep and the
// coupon-reconcile jobs as the platform's cron would. A lock past its
// deadline and past the overdue bound is reported (the alert is logged with
// each kind's count); a sweep whose order service is unreachable fails the
// run and keeps the lock; once the order service answers, the sweep
// releases it and the next reconciliation is clean.
func TestSweepAndReconcileJobs(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Source, outbox.Migrations)
	st := store.New(db)
	cfg := coupontest.Settings(t, nil)
	// A lock (and its attempt's hold) past its deadline and the overdue
	// bound as soon as it is taken (shorter than the configuration
	// accepts): the jobs run on the real clock.
	cfg.LockTTL, cfg.LockOverdueAfter, cfg.LockHoldLease = time.Millisecond, time.Millisecond, time.Millisecond
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	build := func(orders app.Orders) *app.App {
		p, err := assembly.UseCases(db, cfg, assembly.Options{Orders: orders}, log, prometheus.NewRegistry(), nil)
		testenv.Must(t, err)
		return p.App
	}
	down := build(unreachable{})
	tpl, err := down.CreateTemplate(ctx, coupon.Template{Name: "x", DiscountAmount: 1})
	testenv.Must(t, err)
	c, err := down.IssueCoupon(ctx, tpl.ID, 7)
	testenv.Must(t, err)
	_, err = down.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: "GONE", UserID: 7, OrderAmount: 100})
	testenv.Must(t, err)
	time.Sleep(5 * time.Millisecond)

	reconcile := jobs.Reconcile(down, "@every 1m", log)
	sweep := jobs.SweepLocks(down, "@every 1m", log)
	for _, j := range []platform.Job{reconcile, sweep} {
		if j.Name == "" || j.Schedule != "@every 1m" || j.EveryReplica {
			t.Fatalf("job %+v: want a named job on the given schedule, on one replica at a time", j)
		}
	}
	if sweep.Name != "coupon-sweep" || reconcile.Name != "coupon-reconcile" {
		t.Fatalf("jobs named %q and %q, want coupon-sweep and coupon-reconcile", sweep.Name, reconcile.Name)
	}
	testenv.Must(t, reconcile.Run(ctx))
	for _, want := range []string{`"alert":"coupon_reconcile"`, `"lock_overdue":1`, `"paid_order_coupon_not_locked":0`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("alert %q lacks %s", logs.String(), want)
		}
	}
	if err := sweep.Run(ctx); !errors.Is(err, coupon.ErrOrderServiceUnavailable) {
		t.Fatalf("sweep with the order service down: %v, want its error for the platform to count", err)
	}
	if got, _ := st.Coupon(ctx, c.ID); got.Status != coupon.StatusLocked {
		t.Fatalf("coupon = %+v, want still LOCKED", got)
	}

	up := build(cancelledOrders{})
	testenv.Must(t, jobs.SweepLocks(up, "@every 1m", log).Run(ctx))
	if got, _ := st.Coupon(ctx, c.ID); got.Status != coupon.StatusUnused {
		t.Fatalf("coupon = %+v, want released", got)
	}
	before := logs.String()
	testenv.Must(t, jobs.Reconcile(up, "@every 1m", log).Run(ctx))
	if after := strings.TrimPrefix(logs.String(), before); strings.Contains(after, "alert") {
		t.Fatalf("a clean reconciliation alerted: %s", after)
	}
}
