// Package catalogapp holds the product catalog's use cases, one file each:
//
//	create_product.go   POST /products through the configured dedup mode
//	get_products.go     GET /products/:id and GET /products?brand=
//	delete_product.go   logical deletion that frees the product's key
//	create_templates.go the default product data batch copies start from
//	start_copy.go       accept a batch copy: job, chunks and their messages in one tx
//	copy_chunk.go       a worker's share of a batch copy, in the message's tx
//	copy_progress.go    a job's counters and completion
package catalogapp

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// Config tunes the catalog's use cases.
type Config struct {
	// ChunkSize is how many products one batch-copy message carries when
	// duplicates are skipped: the unit of one worker's transaction.
	ChunkSize int
	// MaxAllOrNothing bounds an all-or-nothing (on_duplicate=fail) job.
	// Such a job travels as one message and is created in one transaction,
	// so that one duplicate anywhere fails the whole batch.
	MaxAllOrNothing int
	// MaxPageSize bounds GET /products?brand= pages.
	MaxPageSize int
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.ChunkSize <= 0 || c.ChunkSize > 1000 {
		return fmt.Errorf("catalog: ChunkSize must be in 1..1000, got %d", c.ChunkSize)
	}
	if c.MaxAllOrNothing <= 0 || c.MaxAllOrNothing > 5000 {
		return fmt.Errorf("catalog: MaxAllOrNothing must be in 1..5000, got %d", c.MaxAllOrNothing)
	}
	if c.MaxPageSize <= 0 {
		return errors.New("catalog: MaxPageSize must be positive")
	}
	return nil
}

// Waker is told that new messages were queued in the outbox, so the relay
// publishes them now rather than at its next poll (outbox.Relay.Wake).
type Waker interface{ Wake() }

// App is the catalog's use cases.
type App struct {
	store   catalog.Store
	waker   Waker
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	newID   func() string
}

// New returns the use cases over store. waker may be nil when no relay runs
// in this process.
func New(store catalog.Store, waker Waker, cfg Config, log *slog.Logger, reg prometheus.Registerer, newID func() string) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &App{store: store, waker: waker, cfg: cfg, log: log, metrics: m, newID: newID}, nil
}

type metrics struct {
	copied *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		copied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "order_product_copy_products_total",
			Help: "Products handled by batch-copy workers, by outcome (created, skipped, failed).",
		}, []string{"outcome"}),
	}
	if err := reg.Register(m.copied); err != nil {
		return nil, fmt.Errorf("register catalog metrics: %w", err)
	}
	return m, nil
}
