package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

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
// through the outbox. waker is the outbox relay.
func startProducts(ctx context.Context, rt *platform.Runtime, cfg config.Products, waker catalogapp.Waker) error {
	st, err := store.NewProductStore(rt.DB, store.ProductConfig{Mode: cfg.Mode(), CopySubject: cfg.CopySubject()})
	if err != nil {
		return err
	}
	app, err := catalogapp.New(st, waker, catalogapp.Config{
		ChunkSize:       cfg.ChunkSize,
		MaxAllOrNothing: cfg.MaxAllOrNothing,
		MaxPageSize:     500,
	}, rt.Log, rt.Registry, uuid.NewString)
	if err != nil {
		return err
	}
	httpapi.RegisterProducts(rt.HTTP.Engine(), app, rt.Log)

	consumer, err := messaging.NewProductCopyConsumer(rt.DB, rt.NATS.JS, messaging.ProductCopyConfig{
		Name:    cfg.Consumer,
		Stream:  cfg.Stream,
		Subject: cfg.CopySubject(),
		Mode:    cfg.Mode(),
		Workers: cfg.Workers,
	}, app, func(tx *gorm.DB) catalog.ChunkStore { return st.WithTx(tx) }, rt.Log, rt.Registry)
	if err != nil {
		return fmt.Errorf("product copy consumer: %w", err)
	}
	runUntilShutdown(ctx, rt, "product copy consumer", consumer.Run)

	rt.Log.Info("products ready", "copy_mode", cfg.CopyMode, "workers", cfg.Mode().Workers(cfg.Workers), "chunk_size", cfg.ChunkSize)
	if cfg.Mode() == catalog.ModeBroken {
		rt.Log.Warn("PRODUCT_COPY_MODE=broken: concurrent check-then-insert creates duplicate products (incident 3); for the lab only")
	}
	return nil
}

// runUntilShutdown runs a component in the background and stops it at
// shutdown, in the order platform.Runtime.OnShutdown documents.
func runUntilShutdown(ctx context.Context, rt *platform.Runtime, name string, run func(context.Context) error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		err := run(rctx)
		if err != nil {
			rt.Log.Error("component stopped", "component", name, "err", err)
		}
		done <- err
	}()
	rt.OnShutdown(name, func(sctx context.Context) error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-sctx.Done():
			return sctx.Err()
		}
	})
}
