package config

import (
	"errors"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
)

// Modes are the order service's lab variants, one per incident; each is
// variant.Fixed unless ONCEMALL_ENV=lab, which the platform enforces.
type Modes struct {
	// OrderIdempotency is the entry guard of POST /orders (incident 4):
	// fixed is the Idempotency-Key middleware claiming the key in the
	// order's transaction (idempotency.HandlerInTx); broken is
	// idempotencylab.BrokenCheckThenAct, which looks the key up before the
	// handler and stores it after, so concurrent copies of one request all
	// find nothing and all create an order.
	OrderIdempotency variant.Mode `env:"ORDER_IDEMPOTENCY_MODE" default:"fixed" usage:"entry guard of POST /orders: fixed (Idempotency-Key middleware) or broken (check-then-act, reproduces incident 4, lab only)"`
	// ProductCopy is how products are created (incident 3): fixed inserts
	// each product with a unique key; broken checks then inserts with every
	// copy worker, so concurrent copies duplicate products; Orderly is that
	// broken code with one worker.
	ProductCopy variant.Mode `env:"PRODUCT_COPY_MODE" default:"fixed" usage:"how products are created: fixed (dedup table, the fix), orderly (check-then-insert with one copy worker, correct but slow, lab only) or broken (concurrent check-then-insert, reproduces incident 3, lab only)"`
	// Stock is how an order takes its stock (incident 5): fixed is the
	// conditional decrement (available >= n, rows affected checked);
	// broken reads the stock, decides in the application and writes back
	// the value computed from the read, so concurrent orders overwrite
	// each other and sell more than there is; Optimistic is a version
	// compare-and-set, the order's transaction retried a bounded number of
	// times.
	Stock variant.Mode `env:"ORDER_STOCK_MODE" default:"fixed" usage:"how an order takes its stock: fixed (conditional decrement), broken (read-modify-write, reproduces incident 5, lab only) or optimistic (version compare-and-set with bounded retries, lab only)"`
	// Close is how an unpaid order is closed (incident 6): fixed asks the
	// payment service to close the charge first and leaves a paid order
	// alone; broken closes the order without asking, so a customer paying
	// meanwhile pays for a cancelled order.
	Close variant.Mode `env:"ORDER_CLOSE_MODE" default:"fixed" usage:"how an unpaid order is closed: fixed (close the charge at the payment service first) or broken (close without asking, incident 6's broken variant, lab only)"`
	// Numbering is how an order is numbered (incident 7): fixed derives
	// the number from the user and the Idempotency-Key, so every copy and
	// retry of one request has one number and re-enters its coupon lock;
	// broken gives each attempt a new number, so a retry after a crash is
	// refused the coupon its dead try locked.
	Numbering variant.Mode `env:"ORDER_NUMBERING_MODE" default:"fixed" usage:"how an order is numbered: fixed (from the user and the Idempotency-Key) or broken (a new number per attempt, incident 7's broken variant, lab only)"`
}

// Optimistic is the third value of ORDER_STOCK_MODE, a lab variant: stock
// taken by a compare-and-set on the stock row's version, the whole order
// transaction retried a bounded number of times when it loses.
const Optimistic variant.Mode = "optimistic"

// Orderly is the third value of PRODUCT_COPY_MODE, a lab variant:
// incident 3's broken check-then-insert consumed by one copy worker. No two copies overlap, so it holds for batch copies, slowly
// and on one replica only; a POST /products racing a copy can still
// duplicate.
const Orderly variant.Mode = "orderly"

// Validate reports a mode that is not one of its values.
func (m Modes) Validate() error {
	return errors.Join(
		pkgconfig.CheckOneOf("ORDER_IDEMPOTENCY_MODE", m.OrderIdempotency, variant.Fixed, variant.Broken),
		pkgconfig.CheckOneOf("PRODUCT_COPY_MODE", m.ProductCopy, variant.Fixed, Orderly, variant.Broken),
		pkgconfig.CheckOneOf("ORDER_STOCK_MODE", m.Stock, variant.Fixed, variant.Broken, Optimistic),
		pkgconfig.CheckOneOf("ORDER_CLOSE_MODE", m.Close, variant.Fixed, variant.Broken),
		pkgconfig.CheckOneOf("ORDER_NUMBERING_MODE", m.Numbering, variant.Fixed, variant.Broken),
	)
}
