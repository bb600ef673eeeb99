package coupon

import (
	"errors"
	"fmt"
	"time"
)

// LockRequest is an order asking to hold a coupon while it is placed.
type LockRequest struct {
	OrderNo     string
	UserID      uint64
	OrderAmount int64 // cents, the order's total before the discount
	// Attempt names one try of the order (empty: the order number alone
	// names it). A retry of one request keeps its order number and sends a
	// new attempt, so the release of an earlier try does not refuse it.
	Attempt string
}

// Validate reports a request that names no order, no user or no amount.
func (r LockRequest) Validate() error {
	switch {
	case r.OrderNo == "" || len(r.OrderNo) > 64:
		return fmt.Errorf("%w: order_no must be 1 to 64 characters", ErrInvalid)
	case r.UserID == 0:
		return fmt.Errorf("%w: user_id must be positive", ErrInvalid)
	case r.OrderAmount <= 0:
		return fmt.Errorf("%w: order_amount must be positive", ErrInvalid)
	}
	return CheckAttempt(r.Attempt)
}

// CheckAttempt reports an attempt longer than the 64 characters a release
// record keeps.
func CheckAttempt(attempt string) error {
	if len(attempt) > 64 {
		return fmt.Errorf("%w: attempt must be at most 64 characters", ErrInvalid)
	}
	return nil
}

// Lock is a coupon held by an order: the discount the order applies, and
// the deadline after which the sweeper asks what became of the order.
type Lock struct {
	CouponID       uint64
	OrderNo        string
	DiscountAmount int64
	LockedUntil    time.Time
}

// HeldLock returns the lock c records, with the discount of its template t.
func (c Coupon) HeldLock(t Template) Lock {
	return Lock{CouponID: c.ID, OrderNo: c.LockedOrderNo, DiscountAmount: t.DiscountAmount, LockedUntil: c.LockedUntil}
}

// The refusals of a lock. Each is answered 422 with its Reason; none is
// worth retrying with the same request.
var (
	// ErrNotAvailable: the coupon is locked by another order or used.
	ErrNotAvailable = errors.New("coupon not available")
	// ErrExpired: the coupon's validity ended before the lock was asked.
	ErrExpired = errors.New("coupon expired")
	// ErrBelowMinimum: the order does not reach the template's minimum, or
	// is not above the discount (an order is never free).
	ErrBelowMinimum = errors.New("order amount below the coupon's minimum")
	// ErrReleased: this attempt of the order released the lock before the
	// lock request arrived (it was delayed on the way; its order gave up
	// and will never exist). Taking the lock now would hold the coupon for
	// nobody.
	ErrReleased = errors.New("lock released by its order before it arrived")
)

// refusalReasons maps the errors a lock can be refused with to the reason
// the order service receives (and shows its client). ErrNotFound is among
// them: to the order, an unknown coupon is a refused coupon, not a missing
// route.
var refusalReasons = []struct {
	err    error
	reason string
}{
	{ErrNotFound, "not_found"},
	{ErrWrongOwner, "not_owner"},
	{ErrNotAvailable, "not_available"},
	{ErrExpired, "expired"},
	{ErrBelowMinimum, "below_minimum"},
	{ErrReleased, "released"},
}

// RefusalReason returns the reason a lock was refused with, or false when
// err is not a refusal (bad input, a database error).
func RefusalReason(err error) (string, bool) {
	for _, r := range refusalReasons {
		if errors.Is(err, r.err) {
			return r.reason, true
		}
	}
	return "", false
}

// RefusalReasons returns every reason RefusalReason can return, for the
// metrics to start at zero.
func RefusalReasons() []string {
	out := make([]string, len(refusalReasons))
	for i, r := range refusalReasons {
		out[i] = r.reason
	}
	return out
}

// DecideLock is the state machine's answer to "lock c, of template t, for
// the order r at now". The order that holds the lock (or whose payment
// already used it) gets AlreadyDone: a retry after a lost answer is given
// the lock it holds, never a second one, and is not checked again (the
// checks passed when the lock was taken; the coupon may have expired
// since, and the order must still be able to learn its lock). Otherwise the
// coupon must be the caller's, UNUSED, not expired, and the order must reach
// the template's minimum and stay above the discount. Of what it reads only
// the status can change, so a decision to Apply holds for as long as the
// coupon stays UNUSED: the conditional update that takes the lock checks
// exactly that (see app.LockCoupon).
func (c Coupon) DecideLock(t Template, r LockRequest, now time.Time) (Decision, error) {
	if c.UserID != r.UserID {
		// The text may reach the customer through the order service, so it
		// does not name the owner.
		return 0, fmt.Errorf("%w: coupon %d is not user %d's", ErrWrongOwner, c.ID, r.UserID)
	}
	switch c.Status {
	case StatusLocked, StatusUsed:
		if c.LockedOrderNo == r.OrderNo {
			return AlreadyDone, nil
		}
		return 0, fmt.Errorf("%w: coupon %d is %s by another order", ErrNotAvailable, c.ID, lockedOrUsed(c.Status))
	case StatusUnused:
	default:
		return 0, fmt.Errorf("coupon %d has unknown status %q", c.ID, c.Status)
	}
	if !now.Before(c.ExpiresAt) {
		return 0, fmt.Errorf("%w: coupon %d expired at %s", ErrExpired, c.ID, c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if r.OrderAmount < t.MinOrderAmount {
		return 0, fmt.Errorf("%w: order amount %d is below the minimum %d", ErrBelowMinimum, r.OrderAmount, t.MinOrderAmount)
	}
	if r.OrderAmount <= t.DiscountAmount {
		return 0, fmt.Errorf("%w: order amount %d is not above the discount %d", ErrBelowMinimum, r.OrderAmount, t.DiscountAmount)
	}
	return Apply, nil
}

func lockedOrUsed(s Status) string {
	if s == StatusUsed {
		return "used"
	}
	return "locked"
}

// OrderState is what the order service says of the order that holds a lock,
// as far as the sweeper is concerned.
type OrderState string

// The order states the sweeper acts on. OrderNotFound is the order service
// answering that no such order exists: the order's transaction failed or
// its service crashed after the lock was taken.
const (
	OrderNotFound  OrderState = "NOT_FOUND"
	OrderWaitPay   OrderState = "WAIT_PAY"
	OrderPaid      OrderState = "PAID"
	OrderCancelled OrderState = "CANCELLED"
)

// ReleasesLock reports whether a lock past its deadline may be released
// when its order is in state s: only when the order never committed or was
// cancelled. A WAIT_PAY order can still be paid, and a PAID one's
// order.paid is on its way to use the lock; an unknown state is left alone.
func (s OrderState) ReleasesLock() bool {
	return s == OrderNotFound || s == OrderCancelled
}

// ErrOrderServiceUnavailable is the sweeper's order service not answering
// (or answering 5xx): nothing can be decided, the lock is left for the next
// pass.
var ErrOrderServiceUnavailable = errors.New("order service unavailable")
