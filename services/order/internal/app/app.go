// Package app holds the order service's use cases, one file each.
//
// Orders:
//
//	create_order.go     validate, insert the order and its order.created event in one transaction
//	get_order.go        read one order
//	mark_order_paid.go  apply payment.succeeded in the consumer's transaction: WAIT_PAY → PAID and order.paid
//	reconcile.go        list what breaks the payment chain's invariants (GET /admin/reconcile)
//
// Products (incident 3; services/order/PRODUCTS.md):
//
//	create_product.go   POST /products, the fixed way (create_product_fixed.go) or the broken one (create_product_broken.go)
//	get_products.go     a live product, and a brand's live products by page
//	delete_product.go   logical deletion that frees the product's key
//	create_templates.go the default product data batch copies start from
//	start_copy.go       accept a batch copy: job, chunks and their events in one transaction
//	copy_chunk.go       a worker's share of a batch copy in the message's transaction, fixed (copy_chunk_fixed.go) or broken (copy_chunk_broken.go)
//	copy_progress.go    a job's counters and completion
//
// The use cases see the database only through the order and product
// Store and Tx interfaces; which way products are created is
// Config.ProductCopy, the service's PRODUCT_COPY_MODE.
package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// Config tunes the use cases.
type Config struct {
	// ProductCopy is how products are created: variant.Fixed, the dedup
	// keys (create_product_fixed.go, copy_chunk_fixed.go), or any lab
	// variant, which creates them with incident 3's check-then-insert
	// (create_product_broken.go, copy_chunk_broken.go). The lab's orderly
	// variant is that broken code consumed by one worker, which the
	// service's wiring decides, not the use cases.
	ProductCopy variant.Mode
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
	if c.ProductCopy == "" {
		errs = append(errs, errors.New("app: ProductCopy is required"))
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

// App is the set of use cases.
type App struct {
	orders   order.Store
	products product.Store
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	// copied counts the products the batch-copy workers handled, by
	// outcome.
	copied *prometheus.CounterVec
}

// New returns the use cases over the orders' and the catalog's stores,
// registering their metrics on reg.
func New(orders order.Store, products product.Store, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	copied, err := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "order_product_copy_products_total",
		Help: "Products handled by batch-copy workers, by outcome (created, skipped, failed).",
	}, []string{"outcome"}))
	if err != nil {
		return nil, fmt.Errorf("app metrics: %w", err)
	}
	return &App{
		orders: orders, products: products, cfg: cfg, log: log, copied: copied,
		now: func() time.Time { return time.Now().UTC() },
	}, nil
}

// newOrderNo returns a unique, roughly time-ordered order number:
// "O" + UTC time to the millisecond + 8 random hex digits.
func newOrderNo(now time.Time) (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("order number: %w", err)
	}
	return fmt.Sprintf("O%s%03d%s", now.Format("20060102150405"), now.Nanosecond()/1e6, hex.EncodeToString(b)), nil
}
