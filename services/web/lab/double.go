package lab

import (
	"context"
	"sync"
	"time"

	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// doubler is the double-submit switch (incident 4): while armed, the
// storefront sends the next "Place order" or "Pay" to its service twice at
// once with the form's one Idempotency-Key, as a double click that got
// past the page, or a client retrying after a timeout, does. The page is
// shown the first answer; both are kept for the console.
type doubler struct {
	pages.Shop

	mu    sync.Mutex
	armed int
	// doubled counts the submits sent twice, split the ones whose two
	// copies were answered different orders or payments (the invariant:
	// none); last are the newest of them.
	doubled, split int64
	last           []doubled
}

// doubled is one submit sent twice: what, its key, and each copy's answer.
type doubled struct {
	What, Key string
	Answers   [2]string
	At        time.Time
}

// maxLast bounds the submits the console lists.
const maxLast = 5

func (d *doubler) arm(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = n
}

// take uses up one armed submit, if any.
func (d *doubler) take() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed == 0 {
		return false
	}
	d.armed--
	return true
}

// twice runs call twice at once and records their answers under what and
// key; the caller gets the first copy's answer, or the second's if only
// that one succeeded.
func twice[T any](d *doubler, what, key string, call func() (T, error), id func(T) string) (T, error) {
	var out [2]T
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = call()
		}()
	}
	wg.Wait()
	rec := doubled{What: what, Key: key, At: time.Now()}
	for i := range 2 {
		rec.Answers[i] = id(out[i])
		if errs[i] != nil {
			rec.Answers[i] = "refused: " + errs[i].Error()
		}
	}
	d.mu.Lock()
	d.doubled++
	if errs[0] == nil && errs[1] == nil && rec.Answers[0] != rec.Answers[1] {
		d.split++
	}
	d.last = append([]doubled{rec}, d.last[:min(len(d.last), maxLast-1)]...)
	d.mu.Unlock()
	if errs[0] != nil && errs[1] == nil {
		return out[1], nil
	}
	return out[0], errs[0]
}

// PlaceOrder sends the order twice when armed.
func (d *doubler) PlaceOrder(ctx context.Context, who upstream.Caller, key string, items []upstream.Item, couponID uint64) (upstream.Order, error) {
	if !d.take() {
		return d.Shop.PlaceOrder(ctx, who, key, items, couponID)
	}
	return twice(d, "Place order", key, func() (upstream.Order, error) { return d.Shop.PlaceOrder(ctx, who, key, items, couponID) },
		func(o upstream.Order) string { return "order " + o.OrderNo })
}

// Pay sends the payment twice when armed.
func (d *doubler) Pay(ctx context.Context, who upstream.Caller, key, orderNo string) (upstream.Payment, error) {
	if !d.take() {
		return d.Shop.Pay(ctx, who, key, orderNo)
	}
	return twice(d, "Pay", key, func() (upstream.Payment, error) { return d.Shop.Pay(ctx, who, key, orderNo) },
		func(p upstream.Payment) string { return "payment " + p.OutTradeNo })
}

// state is what the console shows of the switch.
func (d *doubler) state() (armed int, doubledN, split int64, last []doubled) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.armed, d.doubled, d.split, append([]doubled(nil), d.last...)
}
