package app_test

import (
	"testing"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// loadConfig is the service's configuration as it starts with env over the
// defaults, validated: the settings the deadline tests rely on are the ones
// the service accepts.
func loadConfig(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	base := map[string]string{"ONCEMALL_ENV": "lab", "HTTP_ADDR": ":8082", "MYSQL_DATABASE": "oncemall_coupon"}
	var c config.Config
	if err := pkgconfig.LoadFrom(&c, func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		v, ok := base[k]
		return v, ok
	}); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// payWalk locks a coupon at t0 with cfg, then runs the sweeper once a
// minute of the app's clock, and at the last second, up to t0 + window
// (the order's pay timeout plus margin), with an order service that answers
// 404 for the order
// (the worst answer it could give: a replica that has not seen the order
// yet, a lookup that misses). The order was paid at the last moment of its
// pay timeout and its order.paid is deducted at the end of the walk. It
// returns the fixture, the coupon, how many locks the sweeper released and
// how often it asked the order service.
func payWalk(t *testing.T, cfg config.Config, window time.Duration) (*fixture, coupon.Coupon, app.Outcome, int) {
	t.Helper()
	f := newFixtureWith(t, testDB(t), cfg, assembly.Options{})
	c := f.issue(t, 7)
	t0 := time.Now().UTC()
	clk := f.clockAt(t0)
	f.lock(t, c.ID, "ORDER", 7)
	released := 0
	end := t0.Add(window)
	for at := t0; !at.After(end); at = at.Add(time.Minute) {
		last := at.Add(time.Minute - time.Second)
		if last.After(end) {
			last = end
		}
		for _, now := range []time.Time{at, last} {
			clk.now = now
			r, err := f.app.SweepLocks(ctx)
			testenv.Must(t, err)
			released += r.Released
		}
	}
	m := f.land(t, "m-paid", "ORDER", 7, c.ID)
	out, _ := f.app.ProcessMessage(ctx, m)
	return f, c, out, released
}

// TestALockOutlivesItsOrdersPayment is the design's guarantee: with the
// settings the service accepts (COUPON_LOCK_TTL >= ORDER_PAY_TIMEOUT +
// COUPON_LOCK_MARGIN), a lock whose order is paid within its pay timeout is
// never swept: the sweeper never even asks about it before the order's
// order.paid uses it, so the paid order finds its coupon LOCKED by it and
// the reconciler has nothing to report. The control runs the same walk
// with a lock as long as the pay timeout, which the configuration refuses:
// the sweeper asks while the order can still be paid, takes the 404 for an
// order that never committed, and the payment then finds the coupon gone.
func TestALockOutlivesItsOrdersPayment(t *testing.T) {
	c, err := loadConfig(t, nil)
	testenv.Must(t, err)
	window := c.PayTimeout + c.LockMargin
	// The shortest lock the configuration accepts ends exactly with the
	// window; its deadline is cut to the millisecond, so its walk stops a
	// millisecond short of the end.
	shortest, err := loadConfig(t, map[string]string{"COUPON_LOCK_TTL": window.String()})
	testenv.Must(t, err)
	for name, w := range map[string]struct {
		cfg    config.Config
		window time.Duration
	}{
		"the default lock":           {c, window},
		"the shortest accepted lock": {shortest, window - time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			f, cp, out, released := payWalk(t, w.cfg, w.window)
			if released != 0 || f.orders.asked.Load() != 0 {
				t.Fatalf("the sweeper released %d locks and asked the order service %d times during the payment window; want neither",
					released, f.orders.asked.Load())
			}
			if got := f.lockRow(t, cp.ID); out != app.Deducted || got.Status != coupon.StatusUsed || got.UsedOrderNo != "ORDER" {
				t.Fatalf("the order paid within its pay timeout: %s, coupon %+v; want it deducted", out, got)
			}
			as, err := f.app.Reconcile(ctx)
			if err != nil || len(as) != 0 {
				t.Fatalf("reconciler: %+v, %v; want nothing", as, err)
			}
		})
	}

	// The control: a lock no longer than the pay timeout.
	if _, err := loadConfig(t, map[string]string{"COUPON_LOCK_TTL": c.PayTimeout.String()}); err == nil {
		t.Fatal("the configuration accepts COUPON_LOCK_TTL = ORDER_PAY_TIMEOUT; the control would not be a control")
	}
	short := c
	short.LockTTL = c.PayTimeout
	f, _, out, released := payWalk(t, short, window)
	if released != 1 || out != app.Failed {
		t.Fatalf("control: %d released, deduction %s; want the lock swept before the payment and the deduction refused", released, out)
	}
	as, err := f.app.Reconcile(ctx)
	if err != nil || len(as) != 1 || as[0].Kind != coupon.AnomalyPaidWithoutLock {
		t.Fatalf("control: reconciler %+v, %v; want the paid order without its lock", as, err)
	}
}

// TestAPaidOrderWhoseLockWasReleasedIsReported forces what the design
// prevents: the lock is released (the order service's release call, by
// mistake) before the order's order.paid arrives. The deduction refuses
// for good, the message ends FAILED with the reason, and the reconciler
// lists the paid order and sets coupon_reconcile_findings for its kind.
// Another order that then locks the coupon keeps it.
func TestAPaidOrderWhoseLockWasReleasedIsReported(t *testing.T) {
	f := newFixture(t, "fixed")
	c := f.issue(t, 7)
	f.lock(t, c.ID, "PAID-LATE", 7)
	if ok, err := f.app.ReleaseLock(ctx, c.ID, "PAID-LATE", ""); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	f.lock(t, c.ID, "NEXT", 7)
	m := f.land(t, "m1", "PAID-LATE", 7, c.ID)
	out, err := f.app.ProcessMessage(ctx, m)
	if out != app.Failed || !coupon.IsPermanent(err) || coupon.FailureReason(err) != "not_locked_by_order" {
		t.Fatalf("deduction: %s, %v; want FAILED as not locked by the order", out, err)
	}
	got, _ := f.store.Message(ctx, m.ID)
	if got.Status != coupon.MessageFailed || got.RetryCount != 1 {
		t.Fatalf("message = %+v, want FAILED after one attempt", got)
	}
	if cp := f.lockRow(t, c.ID); cp.Status != coupon.StatusLocked || cp.LockedOrderNo != "NEXT" {
		t.Fatalf("coupon = %+v, want still LOCKED by NEXT", cp)
	}
	as, err := f.app.Reconcile(ctx)
	testenv.Must(t, err)
	if len(as) != 1 || as[0].Kind != coupon.AnomalyPaidWithoutLock || as[0].OrderNo != "PAID-LATE" ||
		as[0].CouponID != c.ID || as[0].Reason != "not_locked_by_order" {
		t.Fatalf("anomalies %+v, want the paid order without its lock", as)
	}
	if v := f.metric(t, "coupon_reconcile_findings", string(coupon.AnomalyPaidWithoutLock)); v != 1 {
		t.Fatalf("coupon_reconcile_findings{kind=%s} = %v, want 1", coupon.AnomalyPaidWithoutLock, v)
	}
}

// TestAStuckLockIsReportedUntilItIsSettled: a lock still LOCKED longer than
// LockOverdueAfter past its deadline (its order waits for payment long
// after its pay timeout: the close job is stuck) is reported as
// lock_overdue, and the gauge goes back to 0 once it is settled.
func TestAStuckLockIsReportedUntilItIsSettled(t *testing.T) {
	f := newFixture(t, "fixed")
	c := f.issue(t, 7)
	clk := f.clockAt(time.Now().UTC())
	l := f.lock(t, c.ID, "STUCK", 7)
	f.orders.set("STUCK", "WAIT_PAY")
	overdue := f.cfg.LockOverdueAfter
	for _, tt := range []struct {
		at   time.Time
		want float64
	}{
		{l.LockedUntil.Add(overdue - time.Second), 0},
		{l.LockedUntil.Add(overdue + time.Second), 1},
	} {
		clk.now = tt.at
		if r, err := f.app.SweepLocks(ctx); err != nil || r.Kept != 1 {
			t.Fatalf("sweep at %s: %+v, %v; want the WAIT_PAY order's lock kept", tt.at, r, err)
		}
		as, err := f.app.Reconcile(ctx)
		testenv.Must(t, err)
		if v := f.metric(t, "coupon_reconcile_findings", string(coupon.AnomalyLockOverdue)); v != tt.want || float64(len(as)) != tt.want {
			t.Fatalf("at deadline%+v: gauge %v, anomalies %+v; want %v", tt.at.Sub(l.LockedUntil), v, as, tt.want)
		}
	}
	f.orders.set("STUCK", "CANCELLED")
	if r, err := f.app.SweepLocks(ctx); err != nil || r.Released != 1 {
		t.Fatalf("sweep after the cancel: %+v, %v", r, err)
	}
	if _, err := f.app.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if v := f.metric(t, "coupon_reconcile_findings", string(coupon.AnomalyLockOverdue)); v != 0 {
		t.Fatalf("gauge after the lock was settled = %v, want 0", v)
	}
}
