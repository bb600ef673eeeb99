package order

import (
	"context"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
)

// Store is the orders' persistence: the reads the use cases make outside a
// transaction, and InTx for everything that writes.
type Store interface {
	// InTx runs fn in one transaction and commits it when fn returns nil;
	// an error from fn rolls everything back and is returned as is, and so
	// is a failed commit. After a commit that added events it hands them to
	// the outbox relay.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Get returns the order numbered no with its items, or ErrNotFound.
	Get(ctx context.Context, no string) (Order, error)
	// Head returns the order numbered no without its items (Items is
	// nil), or ErrNotFound: one read, for callers that need only its
	// state, owner and amounts.
	Head(ctx context.Context, no string) (Order, error)
	// Catalog returns the live products among ids, by id: a plain read,
	// which prices an order before its coupon is locked.
	Catalog(ctx context.Context, ids []uint64) (map[uint64]CatalogEntry, error)
	// UserOrders returns up to limit of userID's orders with their items,
	// newest first; with before, the orders placed before that one (which
	// must be userID's, or ErrNotFound), the next page of a list.
	UserOrders(ctx context.Context, userID uint64, before string, limit int) ([]Order, error)
	// Expired returns the numbers of up to limit orders still WAIT_PAY that
	// were created before before, oldest first.
	Expired(ctx context.Context, before time.Time, limit int) ([]string, error)
	// Reconcile reads, and only reads, up to q.Limit anomalies of each kind
	// (see AnomalyKind).
	Reconcile(ctx context.Context, q ReconcileQuery) ([]Anomaly, error)
}

// Tx is what a transaction of the orders does.
type Tx interface {
	// Insert writes a new order with its items.
	Insert(ctx context.Context, o Order) error
	// UpdateOrder reads order no under a row lock (so concurrent updates of
	// one order run one after the other, each seeing the last one's
	// result), calls fn with it, and writes what fn changed: the status
	// with its payment or cancellation, with a conditional update on the
	// status it read whose rows affected are checked. An error from fn is
	// returned as is and nothing is written; ErrNotFound when there is no
	// such order.
	UpdateOrder(ctx context.Context, no string, fn func(*Order) error) error
	// UpdateOrderRow is UpdateOrder reading the order's row alone: fn sees
	// the order without its items (Items nil). It returns how many items
	// the order has, counted in the same read, for a caller that moves
	// their reservations by the order number.
	UpdateOrderRow(ctx context.Context, no string, fn func(*Order) error) (items int, err error)
	// AddEvent writes e to the outbox in this transaction; the relay
	// publishes it after the commit.
	AddEvent(ctx context.Context, e events.Event) error

	// Catalog returns the live products among ids, by id, and holds a
	// shared lock on them until the transaction ends, so that a product
	// cannot be deleted or repriced under an order being placed.
	Catalog(ctx context.Context, ids []uint64) (map[uint64]CatalogEntry, error)

	// DecrementStock takes n units of a product in one conditional update
	// (available >= n) and reports whether it did; false means there were
	// fewer than n (or no stock row), and nothing changed. Incident 5's fix.
	DecrementStock(ctx context.Context, productID uint64, n int) (bool, error)

	// AddReservations writes one RESERVED reservation per line of order
	// orderNo.
	AddReservations(ctx context.Context, orderNo string, lines []Line, now time.Time) error
	// ConfirmReservations moves every reservation of order orderNo from
	// RESERVED to CONFIRMED, in one conditional update by the order number,
	// and returns how many moved.
	ConfirmReservations(ctx context.Context, orderNo string, now time.Time) (int, error)
	// ReleaseReservations moves the order's reservation of each line from
	// RESERVED to RELEASED and puts that line's units back in stock, each
	// by a conditional update, in product order; it returns how many moved.
	ReleaseReservations(ctx context.Context, orderNo string, lines []Line, now time.Time) (int, error)
}
