package lab

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
	"github.com/oncemall/oncemall/services/order/internal/catalogapp"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// ProductRigConfig is the catalog set-up one run uses.
type ProductRigConfig struct {
	Mode      catalog.Mode
	Workers   int
	ChunkSize int
}

// ProductRig is the order service's catalog wired as in production (HTTP
// API, outbox relay, JetStream stream, idempotent consumer with its worker
// pool) on a throwaway database and stream of its own.
type ProductRig struct {
	DB    *gorm.DB
	Store *store.ProductStore
	App   *catalogapp.App
	// Consumer is the batch-copy consumer (running).
	Consumer *inbox.Consumer
	// URL is the base URL of the catalog's HTTP API.
	URL string

	stops []func()
}

// StartProductRig builds a rig named from env and suffix. Close releases it.
func StartProductRig(ctx context.Context, env lab.Env, suffix string, cfg ProductRigConfig) (_ *ProductRig, err error) {
	r := &ProductRig{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	db, drop, err := env.OpenDB(ctx, suffix, migrations.Source, outbox.Migrations, inbox.Migrations)
	if err != nil {
		return nil, err
	}
	r.DB = db
	r.stops = append(r.stops, drop)

	conn, err := natsjs.Connect(ctx, env.NATS, env.Name(suffix), env.Log)
	if err != nil {
		return nil, err
	}
	r.stops = append(r.stops, conn.NC.Close)
	// The stream and its subjects are the production ones with a run-unique
	// prefix, so runs never see each other's messages.
	streamName := env.Name(suffix + "_" + events.ProductStream)
	prefix := env.Name(suffix) + "_product"
	subject := prefix + strings.TrimPrefix(events.ProductBatchCopy, "product")
	if _, err := natsjs.EnsureStream(ctx, conn.JS, events.StreamConfig(streamName, prefix)); err != nil {
		return nil, err
	}
	r.stops = append(r.stops, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.JS.DeleteStream(dctx, streamName)
	})

	reg := prometheus.NewRegistry()
	relay, err := outbox.NewRelay(db, conn.JS, outbox.Config{}, env.Log, reg)
	if err != nil {
		return nil, err
	}
	if r.Store, err = store.NewProductStore(db, store.ProductConfig{Mode: cfg.Mode, CopySubject: subject}); err != nil {
		return nil, err
	}
	if r.App, err = catalogapp.New(r.Store, relay, catalogapp.Config{ChunkSize: cfg.ChunkSize, MaxAllOrNothing: 5000, MaxPageSize: 1000}, env.Log, reg, uuid.NewString); err != nil {
		return nil, err
	}
	consumer, err := messaging.NewProductCopyConsumer(db, conn.JS, messaging.ProductCopyConfig{
		Name: "product-batch-copy", Stream: streamName, Subject: subject,
		Mode: cfg.Mode, Workers: cfg.Workers,
		Backoff: []time.Duration{50 * time.Millisecond, 200 * time.Millisecond},
	}, r.App, func(tx *gorm.DB) catalog.ChunkStore { return r.Store.WithTx(tx) }, env.Log, reg)
	if err != nil {
		return nil, err
	}
	r.Consumer = consumer

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(runCtx) })
	wg.Go(func() { _ = consumer.Run(runCtx) })
	// The production service wakes the relay from cron as a safety net; a
	// ticker does it here.
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				relay.Wake()
			}
		}
	})
	r.stops = append(r.stops, func() { cancel(); wg.Wait() })

	srv := httpserver.New(httpserver.Options{Addr: "127.0.0.1:0", Config: httpserver.Config{BodyLimitBytes: 4 << 20}, Logger: env.Log, Registry: reg})
	httpapi.RegisterProducts(srv.Engine(), r.App, env.Log)
	ts := httptest.NewServer(srv.Handler())
	r.URL = ts.URL
	r.stops = append(r.stops, ts.Close)
	return r, nil
}

// Close stops the workers and drops the rig's database and stream.
func (r *ProductRig) Close() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
	r.stops = nil
}

// SeedTemplates creates n templates of brand, named prefix-0000… with
// models M-prefix-0000…, and returns their ids.
func (r *ProductRig) SeedTemplates(ctx context.Context, brand, prefix string, n int) ([]uint64, error) {
	ts := make([]catalog.Template, n)
	for i := range ts {
		ts[i] = catalog.Template{Brand: brand, Name: fmt.Sprintf("%s-%05d", prefix, i), Model: fmt.Sprintf("M-%s-%05d", prefix, i), Price: int64(1000 + i)}
	}
	created, err := r.Store.CreateTemplates(ctx, ts)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, len(created))
	for i, t := range created {
		ids[i] = t.ID
	}
	return ids, nil
}

// WaitJobs waits until every job is done and returns their progress.
func (r *ProductRig) WaitJobs(ctx context.Context, timeout time.Duration, jobIDs ...string) ([]catalog.CopyProgress, error) {
	deadline := time.Now().Add(timeout)
	out := make([]catalog.CopyProgress, len(jobIDs))
	for i, id := range jobIDs {
		for {
			p, err := r.App.CopyProgress(ctx, id)
			if err != nil {
				return nil, err
			}
			if p.Done() {
				out[i] = p
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("job %s not done after %s: %d of %d chunks", id, timeout, p.ChunksDone, p.Job.Chunks)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// ExtraLiveProducts counts live products beyond the first of each
// (name, model): the duplicates incident 3 is about.
func (r *ProductRig) ExtraLiveProducts(ctx context.Context) (int, error) {
	var n int
	err := r.DB.WithContext(ctx).Raw(`SELECT COALESCE(SUM(c - 1), 0) FROM (
		SELECT COUNT(*) AS c FROM products WHERE deleted = 0 GROUP BY name, model HAVING c > 1) d`).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count duplicate products: %w", err)
	}
	return n, nil
}

// LiveProducts counts live products with the given key.
func (r *ProductRig) LiveProducts(ctx context.Context, name, model string) (int, error) {
	var n int64
	err := r.DB.WithContext(ctx).Table("products").Where("deleted = 0 AND name = ? AND model = ?", name, model).Count(&n).Error
	return int(n), err
}
