package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
	"github.com/oncemall/oncemall/services/order/internal/catalogapp"
)

// ProductCopyConfig configures the batch-copy consumer.
type ProductCopyConfig struct {
	// Name is the durable consumer name.
	Name string
	// Stream and Subject are where the chunks travel (events.ProductStream
	// and events.ProductBatchCopy in production).
	Stream  string
	Subject string
	// Mode decides the worker count: orderly consumes with one worker.
	Mode catalog.Mode
	// Workers is the concurrent worker count of the other modes.
	Workers int
	// MaxDeliver and AckWait are passed to the inbox consumer (zero: its
	// defaults).
	MaxDeliver int
	AckWait    time.Duration
	// Backoff is the inbox's redelivery delays (nil: its defaults).
	Backoff []time.Duration
}

// ChunkStoreFor binds the chunk store to a message's transaction.
type ChunkStoreFor func(tx *gorm.DB) catalog.ChunkStore

// NewProductCopyConsumer returns the idempotent consumer that runs batch-copy
// chunks: each chunk's products, its counters and the processed-message row
// commit in one transaction, so a redelivery never copies or counts twice.
func NewProductCopyConsumer(db *gorm.DB, js jetstream.JetStream, cfg ProductCopyConfig, app *catalogapp.App, storeFor ChunkStoreFor, log *slog.Logger, reg prometheus.Registerer) (*inbox.Consumer, error) {
	if cfg.Workers <= 0 {
		return nil, fmt.Errorf("product copy consumer: Workers must be positive, got %d", cfg.Workers)
	}
	h := func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		var c catalog.CopyChunk
		if err := inbox.DecodeJSON(msg, &c); err != nil {
			return err
		}
		err := app.CopyChunk(ctx, storeFor(tx), c)
		if errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrInvalid) {
			// A chunk whose job row is missing or whose policy is unknown
			// will not become valid on redelivery.
			return inbox.Permanent(err)
		}
		return err
	}
	return inbox.NewConsumer(db, js, inbox.Config{
		Name:           cfg.Name,
		Stream:         cfg.Stream,
		FilterSubjects: []string{cfg.Subject},
		Workers:        cfg.Mode.Workers(cfg.Workers),
		MaxDeliver:     cfg.MaxDeliver,
		AckWait:        cfg.AckWait,
		Backoff:        cfg.Backoff,
	}, h, log, reg)
}
