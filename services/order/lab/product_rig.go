package lab

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/product"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// ProductRigConfig is the catalog set-up one run uses.
type ProductRigConfig struct {
	// Mode is PRODUCT_COPY_MODE: variant.Fixed, config.Orderly or
	// variant.Broken.
	Mode variant.Mode
	// Workers is PRODUCT_COPY_WORKERS (the orderly mode runs one).
	Workers   int
	ChunkSize int
}

// ProductRig is the order service's catalog wired as cmd/order wires it
// (HTTP API, outbox relay, JetStream stream, the batch-copy consumer with
// its worker pool) on a throwaway database, with the service's defaults
// and its streams and subjects under an event prefix of its own.
type ProductRig struct {
	DB    *gorm.DB
	Store *store.Products
	App   *app.App
	// Consumer is the batch-copy consumer (running).
	Consumer *inbox.Consumer
	// URL is the base URL of the service's HTTP API; its operator routes
	// take AdminToken.
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
	modes := config.Modes{OrderIdempotency: variant.Fixed, ProductCopy: cfg.Mode, Stock: variant.Fixed, Close: variant.Fixed}
	svc, err := serviceConfig(modes)
	if err != nil {
		return nil, err
	}
	svc.Products.ChunkSize = cfg.ChunkSize
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
	// The production stream and subjects under a run-unique event prefix
	// (EVENT_SUBJECT_PREFIX), so runs never see each other's messages.
	ev := events.Config{SubjectPrefix: strings.ToLower(env.Name(suffix)) + "."}
	stream := natsjs.EventStream(ev, events.ProductBatchCopy)
	if _, err := natsjs.EnsureStream(ctx, conn.JS, stream); err != nil {
		return nil, err
	}
	r.stops = append(r.stops, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.JS.DeleteStream(dctx, stream.Name)
	})

	reg := prometheus.NewRegistry()
	relay, err := outbox.NewRelay(db, conn.JS, outbox.Config{SubjectPrefix: ev.SubjectPrefix}, env.Log, reg)
	if err != nil {
		return nil, err
	}
	r.Store = store.NewProducts(db, relay.Send)
	// The catalog calls neither the coupon nor the payment service; stand-ins
	// answer if an order is ever placed on the rig.
	coupons, payments := stubs.NewCouponService(InternalToken), stubs.NewPaymentService(InternalToken)
	r.stops = append(r.stops, coupons.Close, payments.Close)
	if r.App, err = app.New(store.New(db, relay.Send), r.Store,
		couponclient.New(coupons.URL, InternalToken, http.DefaultClient), paymentclient.New(payments.URL, InternalToken, http.DefaultClient),
		choices(modes), svc.App(), env.Log, reg); err != nil {
		return nil, err
	}
	// The consumer as the platform builds it from the declaration, with
	// short redelivery delays.
	c := platform.Bind(r.Store.InboxTx, messaging.ProductCopy(r.App, copyWorkers(modes, cfg.Workers)))
	r.Consumer, err = inbox.NewConsumer(db, conn.JS, inbox.Config{
		Name: c.Name, Stream: ev.StreamName(c.Subject), FilterSubjects: []string{ev.Subject(c.Subject)},
		Workers: c.Workers, Backoff: []time.Duration{50 * time.Millisecond, 200 * time.Millisecond},
	}, c.Handle, env.Log, reg)
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(runCtx) })
	wg.Go(func() { _ = r.Consumer.Run(runCtx) })
	// The service polls the relay from a job as a safety net; a ticker
	// does it here.
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
	handlers, err := httpapi.New(r.App, httpapi.Options{Log: env.Log, Admin: httpserver.AdminAuth(AdminToken)})
	if err != nil {
		return nil, err
	}
	handlers.Register(srv.Engine())
	ts := httptest.NewServer(srv.Handler())
	r.URL = ts.URL
	r.stops = append(r.stops, ts.Close)
	return r, nil
}

// Upstream is the upstream simulator calling this rig as the operator.
func (r *ProductRig) Upstream() Upstream { return Upstream{BaseURL: r.URL, AdminToken: AdminToken} }

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
	ts := make([]product.Template, n)
	for i := range ts {
		ts[i] = product.Template{Brand: brand, Name: fmt.Sprintf("%s-%05d", prefix, i), Model: fmt.Sprintf("M-%s-%05d", prefix, i), Price: int64(1000 + i)}
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
func (r *ProductRig) WaitJobs(ctx context.Context, timeout time.Duration, jobIDs ...string) ([]product.CopyProgress, error) {
	deadline := time.Now().Add(timeout)
	out := make([]product.CopyProgress, len(jobIDs))
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
