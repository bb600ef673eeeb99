// Package app holds the order service's use cases, one file each.
//
// Orders:
//
//	create_order.go       price from the catalog, lock the coupon, then in one transaction: insert the order, reserve its stock
//	reserve_stock.go      incident 5: the stock of an order, taken by a StockReserver (the fix: reserve_stock_fixed.go)
//	get_order.go          read one order: its owner's view, and the services' view
//	mark_order_paid.go    apply payment.succeeded in the consumer's transaction: WAIT_PAY → PAID, reservations CONFIRMED, order.paid
//	cancel_order.go       the owner's cancel: close the order
//	close_order.go        close one order: close its charge (Payments), then WAIT_PAY → CANCELLED, reservations RELEASED, order.cancelled
//	close_expired.go      the order-close job's pass over orders unpaid past Config.PayTimeout
//	reconcile.go          list what breaks the order side's invariants (GET /admin/reconcile, the order-reconcile job)
//
// Products (incident 3; services/order/PRODUCTS.md):
//
//	create_product.go   POST /admin/products through a ProductCreator (the fix: create_product_fixed.go)
//	get_products.go     a live product, and a brand's live products by page
//	set_stock.go        PUT /admin/products/{id}/stock
//	delete_product.go   logical deletion that frees the product's key
//	create_templates.go the default product data batch copies start from
//	start_copy.go       accept a batch copy: job, chunks and their events in one transaction
//	copy_chunk.go       a worker's share of a batch copy in the message's transaction (the fix: copy_chunk_fixed.go)
//	copy_progress.go    a job's counters and completion
//
// The use cases see the database only through the order and product
// Store and Tx interfaces, and the coupon and payment services through
// Coupons and Payments. Each incident's choice is an interface of this
// package with its fix here (Choices); the broken and optimistic variants
// live in services/order/lab, which plugs them in only in the lab.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// Config tunes the use cases.
type Config struct {
	// PayTimeout is how long an order may wait for its payment before the
	// order-close job closes it (ORDER_PAY_TIMEOUT).
	PayTimeout time.Duration
	// CloseBatch bounds the orders one pass of the order-close job closes.
	CloseBatch int
	// ChunkSize is how many products one batch-copy message carries when
	// duplicates are skipped: the unit of one worker's transaction (1..1000).
	ChunkSize int
	// MaxAllOrNothing bounds an all-or-nothing (on_duplicate=fail) job,
	// which travels as one message and is created in one transaction, so
	// that one duplicate anywhere fails the whole batch (1..5000).
	MaxAllOrNothing int
	// ReconcileLookback is how far back Reconcile looks for paid orders and
	// dead letters: the outbox retention (OUTBOX_RETENTION), after which
	// sent order.paid rows are deleted and a paid order has no event to
	// show. A dead letter older than it is no longer reported, so one dead
	// letter cannot keep the reconciler from ever being empty again.
	ReconcileLookback time.Duration
}

// Validate reports every unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.PayTimeout <= 0 {
		errs = append(errs, fmt.Errorf("app: PayTimeout must be positive, got %s", c.PayTimeout))
	}
	if c.CloseBatch < 1 || c.CloseBatch > 10000 {
		errs = append(errs, fmt.Errorf("app: CloseBatch must be in 1..10000, got %d", c.CloseBatch))
	}
	if c.ChunkSize < 1 || c.ChunkSize > 1000 {
		errs = append(errs, fmt.Errorf("app: ChunkSize must be in 1..1000, got %d", c.ChunkSize))
	}
	if c.MaxAllOrNothing < 1 || c.MaxAllOrNothing > 5000 {
		errs = append(errs, fmt.Errorf("app: MaxAllOrNothing must be in 1..5000, got %d", c.MaxAllOrNothing))
	}
	if c.ReconcileLookback <= 0 {
		errs = append(errs, fmt.Errorf("app: ReconcileLookback must be positive, got %s", c.ReconcileLookback))
	}
	return errors.Join(errs...)
}

// Coupons is the coupon service as placing an order needs it
// (internal/couponclient).
type Coupons interface {
	// Lock locks a coupon for an order and returns its discount. The call
	// is idempotent per order number: a retry gets the same lock. A refusal
	// is *order.CouponRefusedError; anything else that is not an answer (no
	// answer, an answer outside the contract) wraps order.ErrUnavailable,
	// and then the coupon may or may not be locked.
	Lock(ctx context.Context, r order.CouponLockRequest) (order.CouponLock, error)
	// Release releases the coupon's lock if order orderNo holds it, and
	// reports whether it did; releasing a lock the order does not hold
	// changes nothing, except that a lock of attempt arriving later is
	// refused (the coupon service remembers the release).
	Release(ctx context.Context, couponID uint64, orderNo, attempt string) (bool, error)
}

// Payments is the payment service as closing an order needs it
// (internal/paymentclient): incident 6's fix is to ask it before an order
// is closed.
type Payments interface {
	// CloseCharge closes the order's charge so that no payment can land
	// after the order closes, and answers order.ChargeClosed, or
	// order.ChargePaid when the customer paid first. It is idempotent.
	// Anything but an answer wraps order.ErrUnavailable.
	CloseCharge(ctx context.Context, orderNo string) (order.ChargeOutcome, error)
}

// Choices are the incidents' choices and the clock: nil is the fix (the
// service's production), anything else a lab's or a test's substitution.
type Choices struct {
	// Stock takes an order's units (incident 5); nil: FixedStock.
	Stock StockReserver
	// Products creates products, one or a batch-copy chunk at a time
	// (incident 3); nil: KeyedProducts.
	Products ProductCreator
	// Numbers numbers the orders (incident 7); nil: KeyedOrderNumbers.
	Numbers OrderNumbers
	// Clock is the use cases' time; nil: the system clock in UTC. What it
	// returns is truncated to the millisecond the database keeps.
	Clock func() time.Time
}

// App is the set of use cases.
type App struct {
	orders   order.Store
	products product.Store
	coupons  Coupons
	payments Payments
	stock    StockReserver
	creator  ProductCreator
	numbers  OrderNumbers
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	m        appMetrics
}

// appMetrics are what an operator watches of the use cases.
type appMetrics struct {
	// copied counts the products the batch-copy workers handled, by
	// outcome.
	copied *prometheus.CounterVec
	// stock counts stock decisions by outcome: reserved, out_of_stock,
	// and, in the optimistic variant, conflict (a lost compare-and-set,
	// retried) and contention (given up).
	stock *prometheus.CounterVec
	// couponLocks and couponReleases count the calls to the coupon
	// service by outcome.
	couponLocks, couponReleases *prometheus.CounterVec
	// closes counts order closes by reason and outcome.
	closes *prometheus.CounterVec
	// findings is the last reconciliation's count of each anomaly kind.
	findings *prometheus.GaugeVec
}

// New returns the use cases over the orders' and the catalog's stores and
// the coupon and payment services, with ch's choices, registering their
// metrics on reg.
func New(orders order.Store, products product.Store, coupons Coupons, payments Payments, ch Choices, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if orders == nil || products == nil || coupons == nil || payments == nil {
		return nil, errors.New("app: orders, products, coupons and payments are required")
	}
	s := metrics.NewSet(reg)
	m := appMetrics{
		copied:         s.Counters("order_product_copy_products_total", "Products handled by batch-copy workers, by outcome (created, skipped, failed).", "outcome"),
		stock:          s.Counters("order_stock_decisions_total", "Stock taken for order lines, by mode and outcome (reserved, out_of_stock; optimistic also conflict, contention).", "mode", "outcome"),
		couponLocks:    s.Counters("order_coupon_locks_total", "Coupon lock calls to the coupon service, by outcome (locked, refused, failed).", "outcome"),
		couponReleases: s.Counters("order_coupon_releases_total", "Coupon lock releases after an order failed, by outcome (released, not_held, kept: the order had committed, failed: left to the coupon sweeper).", "outcome"),
		closes:         s.Counters("order_closes_total", "Order closes by reason (timeout, customer) and outcome (cancelled, already_cancelled, paid, failed).", "reason", "outcome"),
		findings:       s.Gauges("order_reconcile_findings", "Findings of the last reconciliation, by kind; anything above zero is an incident.", "kind"),
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("app metrics: %w", err)
	}
	for _, k := range order.AnomalyKinds {
		m.findings.WithLabelValues(string(k))
	}
	if ch.Stock == nil {
		ch.Stock = FixedStock{}
	}
	if ch.Products == nil {
		ch.Products = KeyedProducts{}
	}
	if ch.Numbers == nil {
		ch.Numbers = KeyedOrderNumbers{}
	}
	clock := time.Now
	if ch.Clock != nil {
		clock = ch.Clock
	}
	return &App{
		orders: orders, products: products, coupons: coupons, payments: payments, cfg: cfg, log: log, m: m,
		stock: ch.Stock, creator: ch.Products, numbers: ch.Numbers,
		// UTC, to the millisecond the database keeps (DATETIME(3)), so that
		// an answer built from a value just written says what a later read
		// of it says.
		now: func() time.Time { return clock().UTC().Truncate(time.Millisecond) },
	}, nil
}
