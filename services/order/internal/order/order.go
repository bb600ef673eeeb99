// Package order is the order service's domain: an order, its items, its
// status and the transitions allowed between statuses, what a payment means
// for an order, the invariants the reconciler checks, and the Store and Tx
// interfaces the use cases need. It does no I/O.
package order

import (
	"errors"
	"fmt"
	"time"
)

// Status is where an order is in its life.
type Status string

// Statuses. WAIT_PAY is the only starting point; PAID and CANCELLED are
// final.
const (
	StatusWaitPay   Status = "WAIT_PAY"
	StatusPaid      Status = "PAID"
	StatusCancelled Status = "CANCELLED"
)

// transitions lists the allowed moves; anything else is a conflict.
var transitions = map[Status][]Status{
	StatusWaitPay: {StatusPaid, StatusCancelled},
}

// CanBecome reports whether an order in s may move to next.
func (s Status) CanBecome(next Status) bool {
	for _, t := range transitions[s] {
		if t == next {
			return true
		}
	}
	return false
}

// Sentinel errors, mapped to HTTP statuses and consumer outcomes at the
// edges.
var (
	ErrInvalid  = errors.New("invalid order")
	ErrNotFound = errors.New("order not found")
	// ErrConflict: the order is not in a state that allows the change (a
	// payment for a cancelled order, or for an order another payment paid).
	ErrConflict = errors.New("order state conflict")
	// ErrAmountMismatch: a payment's amount differs from the order's.
	ErrAmountMismatch = errors.New("payment amount does not match the order")
)

// Limits that keep an order sane (and its total inside int64).
const (
	MaxItems     = 100
	MaxQuantity  = 1000
	MaxUnitPrice = 100_000_000 // cents: one million per unit
	MaxAmount    = MaxItems * MaxQuantity * MaxUnitPrice
)

// Item is one order line. Prices are in cents.
type Item struct {
	ProductID uint64
	Quantity  int
	UnitPrice int64
}

// Order is a customer's order.
type Order struct {
	No        string
	UserID    uint64
	Items     []Item
	Amount    int64 // cents
	CouponID  *uint64
	Status    Status
	PaymentNo string
	PaidAt    *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// New validates a new order and returns it in WAIT_PAY. The amount is the
// items' total when items are given, else amount itself; giving both, or
// neither, is invalid.
func New(no string, userID uint64, items []Item, amount int64, couponID *uint64, now time.Time) (Order, error) {
	if no == "" {
		return Order{}, fmt.Errorf("%w: empty order number", ErrInvalid)
	}
	if userID == 0 {
		return Order{}, fmt.Errorf("%w: user id must be positive", ErrInvalid)
	}
	if couponID != nil && *couponID == 0 {
		return Order{}, fmt.Errorf("%w: coupon_id must be positive when given", ErrInvalid)
	}
	switch {
	case len(items) > 0 && amount != 0:
		return Order{}, fmt.Errorf("%w: give items or amount, not both", ErrInvalid)
	case len(items) == 0 && amount == 0:
		return Order{}, fmt.Errorf("%w: give items or an amount", ErrInvalid)
	case len(items) > MaxItems:
		return Order{}, fmt.Errorf("%w: at most %d items", ErrInvalid, MaxItems)
	case len(items) == 0 && (amount < 0 || amount > MaxAmount):
		return Order{}, fmt.Errorf("%w: amount must be between 1 and %d cents", ErrInvalid, int64(MaxAmount))
	}
	if len(items) > 0 {
		seen := map[uint64]bool{}
		for i, it := range items {
			if it.ProductID == 0 {
				return Order{}, fmt.Errorf("%w: item %d: product_id must be positive", ErrInvalid, i)
			}
			if seen[it.ProductID] {
				return Order{}, fmt.Errorf("%w: item %d: product %d listed twice", ErrInvalid, i, it.ProductID)
			}
			seen[it.ProductID] = true
			if it.Quantity < 1 || it.Quantity > MaxQuantity {
				return Order{}, fmt.Errorf("%w: item %d: quantity must be between 1 and %d", ErrInvalid, i, MaxQuantity)
			}
			if it.UnitPrice < 1 || it.UnitPrice > MaxUnitPrice {
				return Order{}, fmt.Errorf("%w: item %d: unit_price must be between 1 and %d cents", ErrInvalid, i, MaxUnitPrice)
			}
			amount += int64(it.Quantity) * it.UnitPrice
		}
	}
	return Order{No: no, UserID: userID, Items: items, Amount: amount, CouponID: couponID, Status: StatusWaitPay, CreatedAt: now, UpdatedAt: now}, nil
}

// Payment is a successful payment of an order, as the payment service
// announces it.
type Payment struct {
	No     string // the payment number (out_trade_no)
	Amount int64  // cents
	// PaidAt is when the payment platform says it was paid, on its clock.
	PaidAt time.Time
}

// PaymentOutcome is what applying a payment to an order means.
type PaymentOutcome int

// Outcomes of CheckPayment.
const (
	// PayNow: the order waits for payment and the amount matches.
	PayNow PaymentOutcome = iota
	// AlreadyPaidBySame: this payment already paid the order (a duplicate
	// notification under another message id); nothing to do.
	AlreadyPaidBySame
)

// CheckPayment decides what a successful payment paymentNo of amount means
// for o: pay it now, nothing (already paid by the same payment), or an
// error (ErrAmountMismatch, ErrConflict).
func (o Order) CheckPayment(paymentNo string, amount int64) (PaymentOutcome, error) {
	if o.Status == StatusPaid && o.PaymentNo == paymentNo {
		return AlreadyPaidBySame, nil
	}
	if !o.Status.CanBecome(StatusPaid) {
		return 0, fmt.Errorf("%w: order %s is %s (payment_no %q), payment %s cannot pay it", ErrConflict, o.No, o.Status, o.PaymentNo, paymentNo)
	}
	if amount != o.Amount {
		return 0, fmt.Errorf("%w: order %s amount %d, payment %s amount %d", ErrAmountMismatch, o.No, o.Amount, paymentNo, amount)
	}
	return PayNow, nil
}

// Pay applies p to o at now: WAIT_PAY becomes PAID by p (true), an order
// this payment already paid stays as it is (false, a duplicate
// notification), anything else is an error from CheckPayment and o is left
// unchanged.
func (o *Order) Pay(p Payment, now time.Time) (bool, error) {
	switch out, err := o.CheckPayment(p.No, p.Amount); {
	case err != nil:
		return false, err
	case out == AlreadyPaidBySame:
		return false, nil
	}
	paidAt := p.PaidAt
	o.Status, o.PaymentNo, o.PaidAt, o.UpdatedAt = StatusPaid, p.No, &paidAt, now
	return true, nil
}
