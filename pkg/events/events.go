// Package events is the contract between the services: the JetStream streams,
// the subjects and the JSON payloads of every event that crosses a service
// boundary. A service publishes only through its outbox and consumes only
// through an idempotent consumer; this package holds no behaviour.
package events

import (
	"time"
)

// Subjects. The first token names the publishing service's stream.
const (
	OrderPaid        = "order.paid"
	OrderCancelled   = "order.cancelled"
	PaymentSucceeded = "payment.succeeded"
	PaymentRefunded  = "payment.refunded"
	ProductBatchCopy = "product.batch_copy"
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id and drops a
// republish of it. The outbox relay's retry span must fit inside it; the
// consumers' processed-message tables cover anything older.
const DuplicateWindow = 10 * time.Minute

// Production stream names, one per publishing service.
const (
	OrderStream   = "ORDER"   // order.>
	PaymentStream = "PAYMENT" // payment.>
	ProductStream = "PRODUCT" // product.>
)

// OrderPaidV1 is the body of order.paid.
type OrderPaidV1 struct {
	OrderNo   string    `json:"order_no"`
	UserID    uint64    `json:"user_id"`
	Amount    int64     `json:"amount"`
	CouponID  *uint64   `json:"coupon_id,omitempty"`
	PaymentNo string    `json:"payment_no"`
	PaidAt    time.Time `json:"paid_at"`
}

// OrderCancelledV1 is the body of order.cancelled: an unpaid order closed by
// its owner or by the close job, after its charge was closed at the
// platform. Its consumers release what the order held (the coupon lock) and
// record the cancellation (the payment service, for its reconciler).
type OrderCancelledV1 struct {
	OrderNo     string    `json:"order_no"`
	UserID      uint64    `json:"user_id"`
	CouponID    *uint64   `json:"coupon_id,omitempty"`
	Reason      string    `json:"reason"` // "timeout" or "customer"
	CancelledAt time.Time `json:"cancelled_at"`
}

// Reasons of OrderCancelledV1.
const (
	CancelTimeout  = "timeout"
	CancelCustomer = "customer"
)

// PaymentSucceededV1 is the body of payment.succeeded.
type PaymentSucceededV1 struct {
	PaymentNo      string    `json:"payment_no"` // out_trade_no
	OrderNo        string    `json:"order_no"`
	Amount         int64     `json:"amount"`
	Channel        string    `json:"channel"`
	PlatformSerial string    `json:"platform_serial"`
	PaidAt         time.Time `json:"paid_at"`
}

// PaymentRefundedV1 is the body of payment.refunded: a payment that landed
// after its order was closed, refunded once (RefundNo is unique).
type PaymentRefundedV1 struct {
	PaymentNo  string    `json:"payment_no"`
	OrderNo    string    `json:"order_no"`
	RefundNo   string    `json:"refund_no"`
	Amount     int64     `json:"amount"`
	RefundedAt time.Time `json:"refunded_at"`
}

// Event is one event a use case emits. The use case adds it to its
// transaction (a domain Tx's AddEvent, which writes the outbox row), and the
// relay publishes it after the commit.
type Event struct {
	// ID is the Nats-Msg-Id and the consumers' deduplication key: derive it
	// from the business key ("order-paid-" + order number), so that a retry
	// of the use case writes the same id and the outbox's unique key refuses
	// the second row.
	ID string
	// Subject is one of this package's subjects, without the deployment's
	// EVENT_SUBJECT_PREFIX (the relay adds it).
	Subject string
	// Payload is one of this package's *V1 types; the outbox stores it as
	// JSON.
	Payload any
}
