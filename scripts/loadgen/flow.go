package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
)

// catalog is what the setup created for the run.
type catalog struct {
	Tag        string   `json:"tag"`       // names the run's products, keys and users
	UserBase   uint64   `json:"user_base"` // purchase i is customer UserBase + i
	ProductIDs []uint64 `json:"product_ids"`
	Stock      int      `json:"stock_per_product"`
	Templates  []uint64 `json:"coupon_templates"`
}

// setup creates the run's products with their stock and its coupon
// templates, as the operator does.
func setup(ctx context.Context, c *client, cfg Config, tag string) (catalog, error) {
	cat := catalog{Tag: tag, Stock: cfg.StockPerItem, UserBase: uint64(time.Now().Unix()) * 1_000_000}
	adm := c.admin()
	for i := range cfg.Products {
		var p struct {
			ID uint64 `json:"id"`
		}
		body := map[string]any{"brand": "loadgen", "name": fmt.Sprintf("loadgen %s item %d", tag, i), "model": fmt.Sprintf("LG-%s-%d", tag, i), "price": 1000 + 250*(i%9)}
		if err := c.json(ctx, request{step: "setup: product", method: "POST", urls: c.targets.Order, path: "/admin/products", headers: adm, body: body, retry: retryOperator}, http.StatusCreated, &p); err != nil {
			return cat, err
		}
		path := fmt.Sprintf("/admin/products/%d/stock", p.ID)
		if err := c.json(ctx, request{step: "setup: stock", method: "PUT", urls: c.targets.Order, path: path, headers: adm, body: map[string]any{"available": cfg.StockPerItem}, retry: retryOperator}, http.StatusOK, nil); err != nil {
			return cat, err
		}
		cat.ProductIDs = append(cat.ProductIDs, p.ID)
	}
	for i, off := range []int{200, 300, 500} {
		var t struct {
			ID uint64 `json:"id"`
		}
		body := map[string]any{"name": fmt.Sprintf("loadgen %s %d off", tag, off), "discount_amount": off, "min_order_amount": 1000, "valid_days": 30}
		if err := c.json(ctx, request{step: "setup: coupon template", method: "POST", urls: c.targets.Coupon, path: "/admin/coupon-templates", headers: adm, body: body, retry: retryOperator}, http.StatusCreated, &t); err != nil {
			return cat, fmt.Errorf("coupon template %d: %w", i, err)
		}
		cat.Templates = append(cat.Templates, t.ID)
	}
	return cat, nil
}

// json sends r and decodes the answer into out, which must have status
// want.
func (c *client) json(ctx context.Context, r request, want int, out any) error {
	a, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	if a.Status != want {
		return fmt.Errorf("%s %s: %d %.300s, want %d", r.method, r.path, a.Status, a.Body, want)
	}
	if out != nil {
		if err := json.Unmarshal(a.Body, out); err != nil {
			return fmt.Errorf("%s %s: %w", r.method, r.path, err)
		}
	}
	return nil
}

// purchaser runs purchases.
type purchaser struct {
	c   *client
	cfg Config
	cat catalog
	st  *stats
	// signer mints each customer's access token (auth.DevSigner).
	signer *auth.Signer
}

// Outcomes of a purchase, the keys of Report.Outcomes.
const (
	outStarted        = "started"
	outSignInFailed   = "sign-in failed"
	outCouponIssued   = "coupon issued"
	outOrdered        = "ordered"
	outOutOfStock     = "order refused: out of stock"
	outOrderRefused   = "order refused: "
	outOrderGaveUp    = "order: client gave up"
	outPayRequested   = "payment requested"
	outPayRefused     = "payment refused: "
	outPayGaveUp      = "payment: client gave up"
	outCancelled      = "cancelled"
	outCancelRefused  = "cancel refused: "
	outCancelGaveUp   = "cancel: client gave up"
	outDoubleSubmits  = "double submits (one key, two at once)"
	outRaced          = "paid and cancelled at once"
	outCouponGaveUp   = "coupon issue: gave up"
	outCouponRejected = "coupon issue refused"
	outBudgetSuffix   = " (retry budget spent)"
)

// gaveUp names the outcome of a step whose client gave up: after
// --retry-for, or because the retry budget refused its retry.
func gaveUp(outcome string, err error) string {
	if errors.Is(err, errBudget) {
		return outcome + outBudgetSuffix
	}
	return outcome
}

// purchase is customer i's purchase, its choices drawn from the run's
// seed and i alone, so a seed repeats the mix.
func (p *purchaser) purchase(ctx context.Context, i uint64) {
	rng := rand.New(rand.NewPCG(uint64(p.cfg.Seed), i))
	user := p.cat.UserBase + i
	p.st.outcome(outStarted)
	// The customer signs in: a token for the services' issuer, minted
	// with the development key that issuer publishes.
	token, err := p.signer.Mint(p.c.targets.Issuer, p.c.targets.Audience, user, time.Hour, auth.RoleCustomer)
	if err != nil {
		p.st.outcome(outSignInFailed)
		return
	}
	authz := "Bearer " + token

	// The operator issues the customer a coupon.
	var couponID uint64
	if rng.Float64() < p.cfg.CouponShare {
		var cp struct {
			ID uint64 `json:"id"`
		}
		tmpl := p.cat.Templates[rng.IntN(len(p.cat.Templates))]
		a, err := p.c.do(ctx, request{step: "POST /admin/coupons", method: "POST", urls: p.c.targets.Coupon, path: "/admin/coupons",
			headers: p.c.admin(), body: map[string]any{"template_id": tmpl, "user_id": user}, retry: retryCustomer})
		switch {
		case err != nil:
			p.st.outcome(gaveUp(outCouponGaveUp, err))
		case a.Status != http.StatusCreated || json.Unmarshal(a.Body, &cp) != nil:
			p.st.outcome(outCouponRejected)
		default:
			couponID = cp.ID
			p.st.outcome(outCouponIssued)
		}
	}

	// The order: one or two of the run's products.
	items := []map[string]any{}
	first := rng.IntN(len(p.cat.ProductIDs))
	items = append(items, map[string]any{"product_id": p.cat.ProductIDs[first], "quantity": 1 + rng.IntN(3)})
	if len(p.cat.ProductIDs) > 1 && rng.IntN(3) == 0 {
		second := (first + 1 + rng.IntN(len(p.cat.ProductIDs)-1)) % len(p.cat.ProductIDs)
		items = append(items, map[string]any{"product_id": p.cat.ProductIDs[second], "quantity": 1 + rng.IntN(2)})
	}
	body := map[string]any{"items": items}
	if couponID != 0 {
		body["coupon_id"] = couponID
	}
	double := rng.Float64() < p.cfg.DoubleShare
	if double {
		p.st.outcome(outDoubleSubmits)
	}
	headers := map[string]string{"Authorization": authz, "Idempotency-Key": fmt.Sprintf("lg-%s-order-%d", p.cat.Tag, i)}
	a, err := p.submit(ctx, double, request{step: "POST /orders", method: "POST", urls: p.c.targets.Order, path: "/orders", headers: headers, body: body, retry: retryCustomer})
	var order struct {
		OrderNo string `json:"order_no"`
	}
	switch {
	case err != nil:
		p.st.outcome(gaveUp(outOrderGaveUp, err))
		return
	case a.Status == http.StatusCreated && json.Unmarshal(a.Body, &order) == nil && order.OrderNo != "":
		p.st.outcome(outOrdered)
	case a.Status == http.StatusConflict && a.problemCode() == "out_of_stock":
		p.st.outcome(outOutOfStock)
		return
	default:
		p.st.outcome(outOrderRefused + statusAndCode(a))
		return
	}

	// Pay it, cancel it, or both at once.
	draw := rng.Float64()
	double = rng.Float64() < p.cfg.DoubleShare
	pay := func() {
		h := map[string]string{"Authorization": authz, "Idempotency-Key": fmt.Sprintf("lg-%s-pay-%d", p.cat.Tag, i)}
		a, err := p.submit(ctx, double, request{step: "POST /payments", method: "POST", urls: p.c.targets.Payment, path: "/payments", headers: h, body: map[string]any{"order_no": order.OrderNo}, retry: retryCustomer})
		switch {
		case err != nil:
			p.st.outcome(gaveUp(outPayGaveUp, err))
		case a.Status == http.StatusCreated || a.Status == http.StatusOK:
			p.st.outcome(outPayRequested)
		default:
			p.st.outcome(outPayRefused + statusAndCode(a))
		}
	}
	cancel := func() {
		a, err := p.c.do(ctx, request{step: "POST /orders/:no/cancel", method: "POST", urls: p.c.targets.Order, path: "/orders/" + order.OrderNo + "/cancel",
			headers: map[string]string{"Authorization": authz}, body: map[string]any{}, retry: retryCustomer})
		switch {
		case err != nil:
			p.st.outcome(gaveUp(outCancelGaveUp, err))
		case a.Status == http.StatusOK:
			p.st.outcome(outCancelled)
		default:
			p.st.outcome(outCancelRefused + statusAndCode(a))
		}
	}
	switch {
	case draw < p.cfg.CancelShare:
		cancel()
	case draw < p.cfg.CancelShare+p.cfg.RaceShare:
		p.st.outcome(outRaced)
		var wg sync.WaitGroup
		wg.Go(pay)
		wg.Go(cancel)
		wg.Wait()
	default:
		pay()
	}
}

// submit sends r once, or twice at once when double is set; two answers
// that are both 2xx must be the same answer (the key's first response,
// replayed), or the client has seen a duplicate.
func (p *purchaser) submit(ctx context.Context, double bool, r request) (answer, error) {
	if !double {
		return p.c.do(ctx, r)
	}
	var a, b answer
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { a, errA = p.c.do(ctx, r) })
	wg.Go(func() { b, errB = p.c.do(ctx, r) })
	wg.Wait()
	if errA == nil && errB == nil && a.Status/100 == 2 && b.Status/100 == 2 && string(a.Body) != string(b.Body) {
		p.st.anomaly("%s %s, one Idempotency-Key, two different answers: %.200s | %.200s", r.method, r.path, a.Body, b.Body)
	}
	if errA != nil {
		return b, errB
	}
	return a, nil
}

func statusAndCode(a answer) string {
	if c := a.problemCode(); c != "" {
		return fmt.Sprintf("%d %s", a.Status, c)
	}
	return strconv.Itoa(a.Status)
}

// drive starts purchases phase after phase from began, each phase at its
// rate (or with cfg.Concurrency workers), and waits for the ones started
// to finish; it returns how many it started and how long after the end of
// the load the last one finished.
func (p *purchaser) drive(ctx context.Context, tl timeline, began time.Time) (started uint64, tail time.Duration) {
	end := began.Add(tl.total)
	loadCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var n atomic.Uint64
	var wg sync.WaitGroup
	// A cap on the purchases in flight keeps a stalled system from
	// exhausting the machine.
	sem := make(chan struct{}, 20000)
	var next uint64
	for k, ph := range tl.phases {
		phaseStart := began.Add(tl.starts[k])
		phaseEnd := began.Add(tl.end(k))
		if ph.Rate > 0 {
			// Open loop: the phase's purchase j starts at its start +
			// j/rate, whether or not the earlier ones have finished (as
			// customers do).
			for j := 0; ; j++ {
				at := phaseStart.Add(time.Duration(float64(j) / ph.Rate * float64(time.Second)))
				if !at.Before(phaseEnd) {
					break
				}
				if d := time.Until(at); d > 0 {
					select {
					case <-loadCtx.Done():
					case <-time.After(d):
					}
				}
				if loadCtx.Err() != nil {
					break
				}
				select {
				case sem <- struct{}{}:
				default:
					p.st.outcome("not started: 20000 purchases in flight")
					continue
				}
				i := next
				next++
				n.Add(1)
				p.st.started(i, k)
				wg.Go(func() {
					defer func() { <-sem }()
					p.purchase(ctx, i)
				})
			}
			continue
		}
		// Closed loop: workers run purchases back to back until the
		// phase ends.
		phaseCtx, stop := context.WithDeadline(loadCtx, phaseEnd)
		var workers sync.WaitGroup
		var shared atomic.Uint64
		shared.Store(next)
		for range p.cfg.Concurrency {
			workers.Go(func() {
				for phaseCtx.Err() == nil {
					i := shared.Add(1) - 1
					n.Add(1)
					p.st.started(i, k)
					p.purchase(ctx, i)
				}
			})
		}
		<-phaseCtx.Done()
		stop()
		workers.Wait()
		next = shared.Load()
	}
	<-loadCtx.Done()
	wg.Wait()
	return n.Load(), max(0, time.Since(end))
}
