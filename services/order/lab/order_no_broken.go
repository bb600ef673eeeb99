package lab

import (
	"time"

	"github.com/oncemall/oncemall/services/order/internal/app"
)

// PerAttemptOrderNumbers is the numbering of incident 7 AS IT WAS: kept to
// reproduce it in the lab and in the tests. Do not copy it.
// app.KeyedOrderNumbers, in services/order/internal/app/order_no.go, is the
// fix. Walkthrough: docs/incidents/7-locks-outlive-orders.md.
//
// BROKEN: every try of a request gets a new number, Idempotency-Key or not,
// and the coupon lock is held by the number. Two failures follow:
//
//  1. The order service dies between the coupon lock and the commit; the
//     customer's retry with the same key is a new order number, finds the
//     coupon LOCKED by the dead try's number, and is refused
//     not_available, a 422 the key then answers with for its retention.
//  2. Two concurrent copies of one request (the entry layer down) lock under
//     two numbers: one is refused because of its sibling's lock, and when
//     that refusal is stored first the sibling loses the key and rolls
//     back: no order, and every retry replays the 422.
type PerAttemptOrderNumbers struct{}

// OrderNo implements app.OrderNumbers.
func (PerAttemptOrderNumbers) OrderNo(_ uint64, _ string, now time.Time) (string, error) {
	return app.NewOrderNo(now)
}
