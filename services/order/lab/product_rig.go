package lab

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/product"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// ProductRigConfig is the catalog set-up one run uses.
type ProductRigConfig struct {
	// Mode is PRODUCT_COPY_MODE: variant.Fixed, Orderly or variant.Broken.
	Mode variant.Mode
	// Workers is PRODUCT_COPY_WORKERS (the orderly mode runs one).
	Workers   int
	ChunkSize int
}

// ProductRig is the order service as cmd/order runs it in the lab
// (StartService: HTTP API, outbox relay, JetStream streams, the batch-copy
// consumer with its worker pool), the catalog being what its scenarios use.
type ProductRig struct {
	*Service
	DB    *gorm.DB
	Store *store.Products
	App   *app.App
	// Consumer is the service's batch-copy consumer, as the platform runs
	// it: a test hands it messages of its own too (Process).
	Consumer *inbox.Consumer

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
	// The catalog calls neither the coupon nor the payment service;
	// stand-ins answer if an order is ever placed on the rig.
	coupons, payments := stubs.NewCouponService(InternalToken), stubs.NewPaymentService(InternalToken)
	r.stops = append(r.stops, coupons.Close, payments.Close)
	svc, err := StartService(ctx, env, suffix, map[string]string{
		"COUPON_URL": coupons.URL, "PAYMENT_URL": payments.URL, "PRODUCT_COPY_MODE": string(cfg.Mode),
		"PRODUCT_COPY_WORKERS": strconv.Itoa(cfg.Workers), "PRODUCT_COPY_CHUNK_SIZE": strconv.Itoa(cfg.ChunkSize),
	}, nil)
	if err != nil {
		return nil, err
	}
	r.Service = svc
	r.stops = append(r.stops, svc.Close)
	r.DB, r.Store, r.App = svc.Wiring.DB, svc.Parts.Products, svc.Parts.App
	if r.Consumer = svc.Wiring.Consumer(messaging.ProductCopyConsumer); r.Consumer == nil {
		return nil, fmt.Errorf("the order service runs no consumer %s", messaging.ProductCopyConsumer)
	}
	return r, nil
}

// Upstream is the upstream simulator calling this rig as the operator.
func (r *ProductRig) Upstream() Upstream {
	return Upstream{BaseURL: r.Service.URL, AdminToken: AdminToken}
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
