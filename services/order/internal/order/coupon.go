package order

import (
	"fmt"
	"time"
)

// CouponLockRequest asks the coupon service to lock a coupon for an order:
// the coupon must be the user's, unused, unexpired, and its template's
// minimum must be met by OrderAmount (the order's total before discount).
type CouponLockRequest struct {
	CouponID    uint64
	OrderNo     string
	UserID      uint64
	OrderAmount int64
	// Attempt names this try of the order: a retry keeps the order number
	// (KeyedOrderNumbers) and sends a new attempt, so that the coupon
	// service refuses a late lock of an earlier try it was told to release,
	// and not the retry's.
	Attempt string
}

// CouponLock is a coupon locked for an order: its discount, and until when
// the coupon service holds the lock if nothing settles it.
type CouponLock struct {
	CouponID       uint64
	OrderNo        string
	DiscountAmount int64
	LockedUntil    time.Time
}

// CouponRefusedError is the coupon service's refusal to lock a coupon for
// an order (not_found, not_owner, not_available, expired, below_minimum).
// Nothing was locked and no order is written.
type CouponRefusedError struct {
	CouponID uint64
	Reason   string
}

func (e *CouponRefusedError) Error() string {
	return fmt.Sprintf("coupon %d cannot be used for this order: %s", e.CouponID, e.Reason)
}
