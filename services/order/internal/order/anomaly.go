package order

import "time"

// AnomalyKind names a broken invariant the reconciler found.
type AnomalyKind string

// The invariants of the payment chain on the order side, as the reconciler
// checks them. A paid order and its order.paid event are written in one
// transaction, so either without the other means that something wrote
// around the use case (a manual fix, a migration, a bug); a dead-lettered
// payment.succeeded is a payment the platform collected that no order
// reflects.
const (
	// AnomalyPaidWithoutEvent: the order is PAID but no order.paid outbox
	// row exists, so the coupon (and any other consumer) never hears of it.
	AnomalyPaidWithoutEvent AnomalyKind = "paid_order_without_order_paid_event"
	// AnomalyEventWithoutPaid: an order.paid outbox row exists for an order
	// that is not PAID, or does not exist: downstream acts on a payment the
	// order does not show.
	AnomalyEventWithoutPaid AnomalyKind = "order_paid_event_without_paid_order"
	// AnomalyDeadPayment: a payment.succeeded message was given up on and
	// recorded in the inbox's dead letters; the order it names was not
	// marked paid by it.
	AnomalyDeadPayment AnomalyKind = "payment_succeeded_dead_lettered"
	// AnomalyPaidUnconfirmedStock: a PAID order holds a stock reservation
	// that is not CONFIRMED. The payment's transaction confirms every
	// reservation of its order, so this is a write around the use case; a
	// RELEASED one has put units that were sold back on sale.
	AnomalyPaidUnconfirmedStock AnomalyKind = "paid_order_with_unconfirmed_reservation"
	// AnomalyCancelledUnreleasedStock: a CANCELLED order holds a stock
	// reservation that is not RELEASED: units of an order that will never
	// ship, kept off sale (or counted as sold when CONFIRMED).
	AnomalyCancelledUnreleasedStock AnomalyKind = "cancelled_order_with_unreleased_reservation"
)

// AnomalyKinds lists every kind, in the order a report shows them; the
// reconciler exports one gauge per kind.
var AnomalyKinds = []AnomalyKind{
	AnomalyPaidWithoutEvent, AnomalyEventWithoutPaid, AnomalyDeadPayment,
	AnomalyPaidUnconfirmedStock, AnomalyCancelledUnreleasedStock,
}

// Anomaly is one broken invariant. Fields that do not apply to its kind are
// empty.
type Anomaly struct {
	Kind    AnomalyKind
	OrderNo string
	// Status is the order's status; empty when the order does not exist.
	Status Status
	// MessageID is the outbox message_no or the dead letter's message id.
	MessageID string
	// Reason is why the inbox gave a dead-lettered message up.
	Reason string
	// ProductID and Reservation name the reservation of a stock anomaly.
	ProductID   uint64
	Reservation ReservationStatus
}

// ReconcileQuery tells the store what the order.paid events and the
// payment.succeeded consumer of this service are called, and how far back to
// look.
type ReconcileQuery struct {
	// PaidEventPrefix starts the outbox message_no of every order.paid
	// event; the rest is the order number.
	PaidEventPrefix string
	// Since bounds the PAID and CANCELLED orders and the dead letters looked at, on
	// the order service's own clock. Sent outbox rows are deleted after the
	// outbox retention, so an order paid longer ago has legitimately lost its
	// event. A PAID order counts by updated_at, the time MarkPaid moved it
	// (PAID is final, so nothing moves it later), not by paid_at, which is
	// the payment platform's clock; a CANCELLED order likewise counts by
	// updated_at. A dead letter counts by created_at: one
	// older than Since is taken as handled.
	Since time.Time
	// DeadConsumer is the durable consumer name of the payment.succeeded
	// handler, under which the inbox records its dead letters.
	DeadConsumer string
	// Limit caps each kind's list.
	Limit int
}
