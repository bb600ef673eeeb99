package main

import (
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
	"github.com/oncemall/oncemall/services/order/internal/catalogapp"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/store"
)

// startProducts wires the product catalog (incident 3): its routes, and the
// batch-copy consumer whose workers run the chunks the HTTP handlers queue
// through the outbox. waker is the outbox relay; the caller runs the
// returned consumer. The worker count is PRODUCT_COPY_WORKERS, the delivery
// limits are the service's INBOX_* settings.
func startProducts(rt *platform.Runtime, cfg config.Products, in inbox.Settings, waker catalogapp.Waker) (*inbox.Consumer, error) {
	st, err := store.NewProductStore(rt.DB, store.ProductConfig{Mode: cfg.Mode(), CopySubject: cfg.CopySubject()})
	if err != nil {
		return nil, err
	}
	app, err := catalogapp.New(st, waker, catalogapp.Config{
		ChunkSize:       cfg.ChunkSize,
		MaxAllOrNothing: cfg.MaxAllOrNothing,
		MaxPageSize:     500,
	}, rt.Log, rt.Registry, uuid.NewString)
	if err != nil {
		return nil, err
	}
	httpapi.RegisterProducts(rt.HTTP.Engine(), app, rt.Log)

	consumer, err := messaging.NewProductCopyConsumer(rt.DB, rt.NATS.JS, messaging.ProductCopyConfig{
		Name:       cfg.Consumer,
		Stream:     cfg.Stream,
		Subject:    cfg.CopySubject(),
		Mode:       cfg.Mode(),
		Workers:    cfg.Workers,
		MaxDeliver: in.MaxDeliver,
		AckWait:    in.AckWait,
	}, app, func(tx *gorm.DB) catalog.ChunkStore { return st.WithTx(tx) }, rt.Log, rt.Registry)
	if err != nil {
		return nil, fmt.Errorf("product copy consumer: %w", err)
	}

	rt.Log.Info("products ready", "copy_mode", cfg.CopyMode, "workers", cfg.Mode().Workers(cfg.Workers), "chunk_size", cfg.ChunkSize)
	if cfg.Mode() == catalog.ModeBroken {
		rt.Log.Warn("PRODUCT_COPY_MODE=broken: concurrent check-then-insert creates duplicate products (incident 3); for the lab only")
	}
	return consumer, nil
}
