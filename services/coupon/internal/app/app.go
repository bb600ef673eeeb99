// Package app holds the coupon service's use cases, one file each:
//
//	commands: CreateTemplate, IssueCoupon, LockCoupon, ReleaseLock,
//	          ReleaseCancelledOrder, SweepLocks, ForgetReleases, ReceiveOrderPaid, LandOrderPaid,
//	          ProcessDueMessages, ProcessMessage (through a CouponDeducer)
//	queries:  Template, Coupon, UserCoupons, Reconcile
//
// A coupon is locked when its order is placed (LockCoupon), used when the
// order is paid (the deduction of incident 1: deduct_fixed.go here, and the
// incident's deduct_broken.go in services/coupon/lab, plugged in as
// Config.Deducer in lab mode only), and released when
// the order is cancelled or never committed (ReleaseLock,
// ReleaseCancelledOrder, SweepLocks). The contract with the other services
// is docs/purchase-flow.md.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// DeductionModes lists the deductions once: broken reproduces incident 1,
// fixed is the fix. It is what COUPON_DEDUCTION_MODE accepts, the labels of
// coupon_deductions_total and the lab's variants, broken first because the
// lab reports the reproduction before the fix.
var DeductionModes = []variant.Mode{variant.Broken, variant.Fixed}

// Config tunes the use cases.
type Config struct {
	// Deducer makes each attempt at a landed message; nil is the fixed
	// deduction (deduct_fixed.go). The lab plugs in the incident's.
	Deducer CouponDeducer
	// Locks takes and releases the order locks; nil is FixedLockKeeper.
	// The lab plugs in incident 7's.
	Locks LockKeeper
	// Retry is the backoff and retry limit of the local message table.
	Retry coupon.RetryPolicy
	// ClaimBatch is how many due messages one pass of the retry job claims.
	ClaimBatch int
	// Workers is how many of a batch's messages the retry job attempts at
	// once.
	Workers int
	// ClaimLease is how long a claimed message is hidden from other
	// replicas; it must exceed the time a batch takes.
	ClaimLease time.Duration
	// LockTTL is how long a lock lasts before the sweeper may ask about its
	// order. It must outlast the order's payment deadline with a margin
	// (internal/config checks it against ORDER_PAY_TIMEOUT), so a lock is
	// never looked at while its order can still be paid.
	LockTTL time.Duration
	// LockHoldLease is how long an attempt's hold on its order's lock
	// lasts (FixedLockKeeper): longer than an order attempt can live, from
	// its lock call to its commit or its release (the order service's
	// request timeout and its release timeout).
	LockHoldLease time.Duration
	// SweepBatch is how many overdue locks the sweeper reads per page.
	SweepBatch int
	// LockOverdueAfter is how long past its deadline a lock may stay
	// LOCKED before the reconciler reports it.
	LockOverdueAfter time.Duration
	// Clock is the use cases' time; nil is the wall clock in UTC. A test or
	// a lab passes its own to move past lock deadlines without waiting.
	Clock func() time.Time
	// TracerProvider starts the span of each deduction attempt, in the
	// trace of the order.paid delivery that landed its message. Nil or a
	// no-op provider: no spans, and no trace kept on the messages.
	TracerProvider trace.TracerProvider
}

// Validate reports every unusable setting. (The configuration names the
// variables; see internal/config.)
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("app: "+format, args...))
		}
	}
	check(c.Retry.Max > 0, "Retry.Max must be positive")
	check(c.Retry.Base > 0, "Retry.Base must be positive")
	check(c.Retry.Cap >= c.Retry.Base, "Retry.Cap must not be less than Retry.Base")
	check(c.ClaimBatch > 0, "ClaimBatch must be positive")
	check(c.Workers > 0, "Workers must be positive")
	check(c.ClaimLease > 0, "ClaimLease must be positive")
	check(c.LockTTL > 0, "LockTTL must be positive")
	check(c.LockHoldLease > 0, "LockHoldLease must be positive")
	check(c.SweepBatch > 0, "SweepBatch must be positive")
	check(c.LockOverdueAfter > 0, "LockOverdueAfter must be positive")
	return errors.Join(errs...)
}

// Orders is what the sweeper asks the order service (internal/orderclient
// over GET /internal/orders/{no}).
type Orders interface {
	// OrderState returns the state of the order orderNo, and
	// coupon.OrderNotFound when the order service has no such order. An
	// error wrapping coupon.ErrOrderServiceUnavailable means the service
	// could not be asked; any other error is a bad answer about this one
	// order.
	OrderState(ctx context.Context, orderNo string) (coupon.OrderState, error)
}

// App is the coupon service's use cases over a Store.
type App struct {
	store   coupon.Store
	orders  Orders
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	deducer CouponDeducer
	locks   LockKeeper
	tracer  trace.Tracer // nil when tracing is off
	// templates caches the templates read so far (id → coupon.Template);
	// see Template.
	templates sync.Map
}

// New returns the use cases over store, asking orders about the orders of
// overdue locks, with their metrics registered on reg.
func New(store coupon.Store, orders Orders, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if orders == nil {
		return nil, errors.New("app: an order service client is required (the lock sweeper asks it)")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	a := &App{store: store, orders: orders, cfg: cfg, log: log, metrics: m, now: cfg.Clock, deducer: cfg.Deducer, locks: cfg.Locks}
	if a.now == nil {
		a.now = func() time.Time { return time.Now().UTC() }
	}
	if a.deducer == nil {
		a.deducer = FixedDeducer{}
	}
	if a.locks == nil {
		a.locks = FixedLockKeeper{}
	}
	if tracing.Enabled(cfg.TracerProvider) {
		a.tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return a, nil
}
