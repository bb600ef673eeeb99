package coupon

import (
	"fmt"
	"time"
)

// MessageStatus is the state of a local message table entry.
type MessageStatus string

// A message is PENDING until its deduction succeeds (SUCCESS) or is given up
// (FAILED, with the reason in LastError).
const (
	MessagePending MessageStatus = "PENDING"
	MessageSuccess MessageStatus = "SUCCESS"
	MessageFailed  MessageStatus = "FAILED"
)

// Message is one order.paid event landed in the local message table, waiting
// for its coupon to be deducted.
type Message struct {
	ID          uint64
	MessageID   string // the event's Nats-Msg-Id, unique
	OrderNo     string
	UserID      uint64
	CouponID    uint64
	Status      MessageStatus
	RetryCount  int
	NextRetryAt time.Time
	LastError   string
	// Trace holds the trace headers (traceparent, baggage) of the delivery
	// that landed the message, so its deduction continues that trace;
	// empty when tracing is off.
	Trace     map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewMessage returns a PENDING message due at once.
func NewMessage(messageID, orderNo string, userID, couponID uint64, now time.Time) (Message, error) {
	switch {
	case messageID == "" || len(messageID) > 64:
		return Message{}, fmt.Errorf("%w: message id must be 1 to 64 characters", ErrInvalid)
	case orderNo == "" || len(orderNo) > 64:
		return Message{}, fmt.Errorf("%w: order_no must be 1 to 64 characters", ErrInvalid)
	case userID == 0 || couponID == 0:
		return Message{}, fmt.Errorf("%w: user_id and coupon_id must be positive", ErrInvalid)
	}
	return Message{MessageID: messageID, OrderNo: orderNo, UserID: userID, CouponID: couponID,
		Status: MessagePending, NextRetryAt: now, CreatedAt: now, UpdatedAt: now}, nil
}

// RetryPolicy is how the retry job backs off: attempt n (from 1) that fails
// transiently waits Base * 2^(n-1), at most Cap, and after Max failed attempts
// the message is FAILED.
type RetryPolicy struct {
	Max  int
	Base time.Duration
	Cap  time.Duration
}

// AfterFailure returns the status a message moves to, and when it is next
// due, once attempt number attempts (counted from 1) has failed transiently
// at now. Whether a failure is transient is the caller's to decide: a
// permanent one fails the message whatever the count.
func (p RetryPolicy) AfterFailure(attempts int, now time.Time) (status MessageStatus, next time.Time) {
	if attempts >= p.Max {
		return MessageFailed, now
	}
	d := p.Base
	for i := 1; i < attempts && d < p.Cap; i++ {
		d *= 2
	}
	if d > p.Cap {
		d = p.Cap
	}
	return MessagePending, now.Add(d)
}

// TruncateError keeps an error text within the last_error column.
func TruncateError(err error) string {
	s := err.Error()
	if len(s) > 512 {
		s = s[:509] + "..."
	}
	return s
}
