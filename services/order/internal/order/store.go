package order

import (
	"context"

	"github.com/oncemall/oncemall/pkg/events"
)

// Store is the orders' persistence: the reads the use cases make outside a
// transaction, and InTx for everything that writes.
type Store interface {
	// InTx runs fn in one transaction and commits it when fn returns nil;
	// an error from fn rolls everything back and is returned as is, and so
	// is a failed commit. After a commit that added events it wakes the
	// outbox relay.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Get returns the order numbered no with its items, or ErrNotFound.
	Get(ctx context.Context, no string) (Order, error)
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
	// with its payment, with a conditional update on the status it read
	// whose rows affected are checked. An error from fn is returned as is
	// and nothing is written; ErrNotFound when there is no such order.
	UpdateOrder(ctx context.Context, no string, fn func(*Order) error) error
	// AddEvent writes e to the outbox in this transaction; the relay
	// publishes it after the commit.
	AddEvent(ctx context.Context, e events.Event) error
}
