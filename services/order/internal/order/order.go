// Package order is the order service's domain: an order, its items priced
// from the catalog, its amounts and coupon, its status and the transitions
// allowed between statuses, what a payment and a cancellation mean for an
// order, the stock it reserves, the invariants the reconciler checks, and
// the Store and Tx interfaces the use cases need. It does no I/O.
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
	// payment for a cancelled order, or for an order another payment paid;
	// the cancellation of a paid order).
	ErrConflict = errors.New("order state conflict")
	// ErrAmountMismatch: a payment's amount differs from the order's
	// pay amount.
	ErrAmountMismatch = errors.New("payment amount does not match the order")
	// ErrProductUnavailable: an item names a product that does not exist,
	// was deleted, or cannot be sold at its catalog price (free, or priced
	// beyond MaxUnitPrice).
	ErrProductUnavailable = errors.New("product cannot be ordered")
	// ErrPriceChanged: a product's catalog entry changed between the read
	// that priced the order (and locked its coupon for that total) and the
	// order's transaction. Nothing was written; a retry prices it again.
	ErrPriceChanged = errors.New("a product's price changed while the order was placed")
	// ErrUnavailable: a service this one depends on (coupon, payment) did
	// not answer, or answered outside its contract. Nothing was decided; a
	// retry may succeed.
	ErrUnavailable = errors.New("a service the order depends on is unavailable")
)

// Limits that keep an order sane (and its total inside int64).
const (
	MaxItems     = 100
	MaxQuantity  = 999
	MaxUnitPrice = 100_000_000 // cents: one million per unit
)

// Line is what a customer asks for: a product and how many. Everything
// else about an item comes from the catalog.
type Line struct {
	ProductID uint64
	Quantity  int
}

// CheckLines validates what a customer asks for: 1..MaxItems lines, each a
// positive product id listed once with a quantity in 1..MaxQuantity.
func CheckLines(lines []Line) error {
	switch {
	case len(lines) == 0:
		return fmt.Errorf("%w: an order needs at least one item", ErrInvalid)
	case len(lines) > MaxItems:
		return fmt.Errorf("%w: at most %d items", ErrInvalid, MaxItems)
	}
	seen := make(map[uint64]bool, len(lines))
	for i, l := range lines {
		switch {
		case l.ProductID == 0:
			return fmt.Errorf("%w: item %d: product_id must be positive", ErrInvalid, i)
		case seen[l.ProductID]:
			return fmt.Errorf("%w: item %d: product %d listed twice", ErrInvalid, i, l.ProductID)
		case l.Quantity < 1 || l.Quantity > MaxQuantity:
			return fmt.Errorf("%w: item %d: quantity must be between 1 and %d", ErrInvalid, i, MaxQuantity)
		}
		seen[l.ProductID] = true
	}
	return nil
}

// ProductIDs returns the products lines name, in their order.
func ProductIDs(lines []Line) []uint64 {
	ids := make([]uint64, len(lines))
	for i, l := range lines {
		ids[i] = l.ProductID
	}
	return ids
}

// CatalogEntry is what the catalog says about a live product being
// ordered.
type CatalogEntry struct {
	ProductID uint64
	Name      string
	Price     int64 // cents
}

// Item is one order line as ordered: the product's name and unit price are
// the catalog's at the time of the order, snapshotted, so a later price
// change never changes an order.
type Item struct {
	ProductID uint64
	Name      string
	UnitPrice int64 // cents
	Quantity  int
}

// Line is the item's product and quantity.
func (it Item) Line() Line { return Line{ProductID: it.ProductID, Quantity: it.Quantity} }

// Price prices lines from catalog, which holds the live products among
// them: the items with their snapshot, in the lines' order. A product
// missing from catalog (unknown or deleted), free, or priced beyond
// MaxUnitPrice is ErrProductUnavailable.
func Price(lines []Line, catalog map[uint64]CatalogEntry) ([]Item, error) {
	items := make([]Item, len(lines))
	for i, l := range lines {
		e, ok := catalog[l.ProductID]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: product %d does not exist or was deleted", ErrProductUnavailable, l.ProductID)
		case e.Price < 1 || e.Price > MaxUnitPrice:
			return nil, fmt.Errorf("%w: product %d is priced %d cents, outside 1..%d", ErrProductUnavailable, l.ProductID, e.Price, MaxUnitPrice)
		}
		items[i] = Item{ProductID: l.ProductID, Name: e.Name, UnitPrice: e.Price, Quantity: l.Quantity}
	}
	return items, nil
}

// Total is what items cost before any discount.
func Total(items []Item) int64 {
	var total int64
	for _, it := range items {
		total += int64(it.Quantity) * it.UnitPrice
	}
	return total
}

// CheckPrices reports whether items, priced earlier, still match catalog:
// ErrProductUnavailable when a product is gone, ErrPriceChanged when its
// name or price differs.
func CheckPrices(items []Item, catalog map[uint64]CatalogEntry) error {
	for _, it := range items {
		e, ok := catalog[it.ProductID]
		switch {
		case !ok:
			return fmt.Errorf("%w: product %d was deleted while the order was placed", ErrProductUnavailable, it.ProductID)
		case e.Price != it.UnitPrice || e.Name != it.Name:
			return fmt.Errorf("%w: product %d is now %q at %d cents, was %q at %d", ErrPriceChanged, it.ProductID, e.Name, e.Price, it.Name, it.UnitPrice)
		}
	}
	return nil
}

// Cancellation reasons, as order.cancelled carries them.
const (
	ReasonTimeout  = "timeout"  // the order-close job: unpaid past ORDER_PAY_TIMEOUT
	ReasonCustomer = "customer" // the owner's POST /orders/{no}/cancel
)

// Order is a customer's order. Amounts are in cents: TotalAmount is the
// items' total, DiscountAmount the locked coupon's discount, PayAmount what
// the customer pays.
type Order struct {
	No             string
	UserID         uint64
	Items          []Item
	TotalAmount    int64
	DiscountAmount int64
	PayAmount      int64
	CouponID       *uint64
	Status         Status
	PaymentNo      string
	PaidAt         *time.Time
	CancelledAt    *time.Time
	CancelReason   string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// New returns a new order of userID for items in WAIT_PAY, with the
// discount of the coupon locked for it (zero without a coupon). The
// discount must leave something to pay: an order is never free.
func New(no string, userID uint64, items []Item, couponID *uint64, discount int64, now time.Time) (Order, error) {
	switch {
	case no == "":
		return Order{}, fmt.Errorf("%w: empty order number", ErrInvalid)
	case userID == 0:
		return Order{}, fmt.Errorf("%w: user id must be positive", ErrInvalid)
	case len(items) == 0:
		return Order{}, fmt.Errorf("%w: an order needs at least one item", ErrInvalid)
	case couponID != nil && *couponID == 0:
		return Order{}, fmt.Errorf("%w: coupon_id must be positive when given", ErrInvalid)
	case couponID == nil && discount != 0:
		return Order{}, fmt.Errorf("%w: a discount without a coupon", ErrInvalid)
	}
	total := Total(items)
	if discount < 0 || discount >= total {
		return Order{}, fmt.Errorf("%w: discount %d on a total of %d", ErrInvalid, discount, total)
	}
	return Order{
		No: no, UserID: userID, Items: items,
		TotalAmount: total, DiscountAmount: discount, PayAmount: total - discount,
		CouponID: couponID, Status: StatusWaitPay, CreatedAt: now, UpdatedAt: now,
	}, nil
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
	if amount != o.PayAmount {
		return 0, fmt.Errorf("%w: order %s pay amount %d, payment %s amount %d", ErrAmountMismatch, o.No, o.PayAmount, paymentNo, amount)
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

// Cancel closes o at now for reason: WAIT_PAY becomes CANCELLED (true); an
// order already cancelled stays as it is (false: a second cancel, or the
// close job and the owner at once); a paid order cannot be cancelled
// (ErrConflict), and o is left unchanged.
func (o *Order) Cancel(reason string, now time.Time) (bool, error) {
	switch {
	case o.Status == StatusCancelled:
		return false, nil
	case !o.Status.CanBecome(StatusCancelled):
		return false, fmt.Errorf("%w: order %s is %s and cannot be cancelled", ErrConflict, o.No, o.Status)
	case reason != ReasonTimeout && reason != ReasonCustomer:
		return false, fmt.Errorf("%w: cancellation reason %q", ErrInvalid, reason)
	}
	at := now
	o.Status, o.CancelledAt, o.CancelReason, o.UpdatedAt = StatusCancelled, &at, reason, now
	return true, nil
}
