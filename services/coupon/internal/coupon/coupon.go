// Package coupon is the coupon service's domain: templates, coupons issued to
// users with their state machine (UNUSED -> LOCKED -> USED, and LOCKED ->
// UNUSED when a lock is released), the locks orders take on coupons, the
// deduction ledger, the local message table entries that drive deductions,
// and the Store the domain needs (Store and Tx). It imports no web, database or messaging library; the
// events a use case writes through Tx are pkg/events values, the contract
// between the services.
package coupon

import (
	"errors"
	"fmt"
	"time"
)

// Status is a coupon's state.
type Status string

// A coupon starts UNUSED. An order placed with it locks it (LOCKED, naming
// the order and a deadline); the order's payment uses it (USED, exactly
// once, by the order that held the lock); the order's cancellation, a
// release call or the sweeper releases it (UNUSED again).
const (
	StatusUnused Status = "UNUSED"
	StatusLocked Status = "LOCKED"
	StatusUsed   Status = "USED"
)

// DefaultValidDays is the validity of a template that names none.
const DefaultValidDays = 30

// maxValidDays bounds a template's validity at about ten years.
const maxValidDays = 3650

// Template is what coupons are issued from.
type Template struct {
	ID             uint64
	Name           string
	DiscountAmount int64 // cents
	MinOrderAmount int64 // cents
	// ValidDays is how long a coupon of this template can be locked,
	// counted from its issue (Coupon.ExpiresAt).
	ValidDays int
	CreatedAt time.Time
}

// Validate reports the first unusable field of a new template.
func (t Template) Validate() error {
	switch {
	case t.Name == "" || len(t.Name) > 128:
		return fmt.Errorf("%w: name must be 1 to 128 characters", ErrInvalid)
	case t.DiscountAmount <= 0:
		return fmt.Errorf("%w: discount_amount must be positive", ErrInvalid)
	case t.MinOrderAmount < 0:
		return fmt.Errorf("%w: min_order_amount must not be negative", ErrInvalid)
	case t.ValidDays < 1 || t.ValidDays > maxValidDays:
		return fmt.Errorf("%w: valid_days must be 1 to %d", ErrInvalid, maxValidDays)
	}
	return nil
}

// Coupon is one coupon issued to one user.
type Coupon struct {
	ID         uint64
	TemplateID uint64
	UserID     uint64
	Status     Status
	// LockedOrderNo and LockedUntil name the order that locked the coupon
	// and the lock's deadline. They are kept when the lock is used (the
	// record of the lock the deduction consumed) and cleared when it is
	// released.
	LockedOrderNo string
	LockedUntil   time.Time
	UsedOrderNo   string // set when USED
	// ExpiresAt is the end of the coupon's validity, fixed at issue: a
	// coupon cannot be locked from then on (a lock taken before it stays
	// good until its order is paid or cancelled).
	ExpiresAt time.Time
	Version   uint32
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Issue returns a new UNUSED coupon of template t for userID, valid for the
// template's ValidDays from now.
func Issue(t Template, userID uint64, now time.Time) (Coupon, error) {
	if userID == 0 {
		return Coupon{}, fmt.Errorf("%w: user_id must be positive", ErrInvalid)
	}
	if t.ValidDays < 1 {
		return Coupon{}, fmt.Errorf("%w: template %d has no validity", ErrInvalid, t.ID)
	}
	return Coupon{TemplateID: t.ID, UserID: userID, Status: StatusUnused,
		ExpiresAt: now.Add(time.Duration(t.ValidDays) * 24 * time.Hour), CreatedAt: now, UpdatedAt: now}, nil
}

// Decision is what a deduction request means for a coupon in its current state.
type Decision int

const (
	// Apply: make the change asked for (lock the coupon, or deduct it).
	Apply Decision = iota + 1
	// AlreadyDone: the change was made for this very order by an earlier
	// request that committed (even if its caller never heard so); the
	// request succeeds without a second effect.
	AlreadyDone
)

// DecideDeduction is the state machine's answer to "deduct c for orderNo of
// userID", asked when the order is paid. Only the order that holds the
// lock deducts; the coupon already USED by that order means an earlier
// attempt committed. Anything else is a paid order that did not hold the
// coupon, refused for good: USED by another order, or UNUSED or LOCKED by
// another order (its lock was released before the payment landed). It is
// only meaningful on a state read inside the transaction that then writes
// the effect (see the fixed deduction).
func (c Coupon) DecideDeduction(orderNo string, userID uint64) (Decision, error) {
	if c.UserID != userID {
		return 0, fmt.Errorf("%w: coupon %d belongs to user %d, not %d", ErrWrongOwner, c.ID, c.UserID, userID)
	}
	switch c.Status {
	case StatusLocked:
		if c.LockedOrderNo == orderNo {
			return Apply, nil
		}
		return 0, fmt.Errorf("%w: coupon %d is locked by order %s, not %s", ErrNotLockedByOrder, c.ID, c.LockedOrderNo, orderNo)
	case StatusUnused:
		return 0, fmt.Errorf("%w: coupon %d is not locked, order %s does not hold it", ErrNotLockedByOrder, c.ID, orderNo)
	case StatusUsed:
		if c.UsedOrderNo == orderNo {
			return AlreadyDone, nil
		}
		return 0, fmt.Errorf("%w: coupon %d was used by order %s, not %s", ErrUsedByAnotherOrder, c.ID, c.UsedOrderNo, orderNo)
	default:
		return 0, fmt.Errorf("coupon %d has unknown status %q", c.ID, c.Status)
	}
}

// Deduction is one row of the deduction ledger: the business effect the
// reconciler counts. There must be at most one per order.
type Deduction struct {
	ID        uint64
	OrderNo   string
	CouponID  uint64
	UserID    uint64
	Amount    int64
	MessageID string
	CreatedAt time.Time
}

// Sentinel errors. The permanent ones (see IsPermanent) send a message to
// FAILED at once: retrying cannot change the answer.
var (
	ErrInvalid  = errors.New("invalid input")
	ErrNotFound = errors.New("not found")
	// ErrUnknownTemplate refuses to issue a coupon of a template that does
	// not exist: a reference in the request, not the resource asked for.
	ErrUnknownTemplate      = errors.New("unknown template")
	ErrWrongOwner           = errors.New("coupon belongs to another user")
	ErrUsedByAnotherOrder   = errors.New("coupon already used by another order")
	ErrOrderAlreadyDeducted = errors.New("order already has a deduction")
	// ErrNotLockedByOrder refuses to deduct a coupon for a paid order that
	// does not hold its lock: the lock was released (or never taken) before
	// the payment landed. The order got its discount without the coupon;
	// the reconciler reports it.
	ErrNotLockedByOrder = errors.New("coupon not locked by this order")
	// ErrConcurrentChange is returned when a conditional update matched no
	// row although the state read in the same transaction allowed it. It is
	// transient: the retry reads the new state and decides again.
	ErrConcurrentChange = errors.New("coupon changed concurrently")
)

// IsPermanent reports whether retrying the deduction can never succeed: err
// is one of the sentinels in failureReasons.
func IsPermanent(err error) bool {
	for _, r := range failureReasons {
		if errors.Is(err, r.err) {
			return true
		}
	}
	return false
}

// failureReasons maps the permanent sentinel errors, and only those, to their
// FailureReason label, in the order they are tested. It is the one list
// IsPermanent, FailureReason and FailureReasons read, so a new permanent error
// cannot reach one of them without the others.
var failureReasons = []struct {
	err    error
	reason string
}{
	{ErrUsedByAnotherOrder, "used_by_another_order"},
	{ErrOrderAlreadyDeducted, "order_already_deducted"},
	{ErrNotLockedByOrder, "not_locked_by_order"},
	{ErrWrongOwner, "wrong_owner"},
	{ErrNotFound, "not_found"},
	{ErrInvalid, "invalid"},
}

// reasonMaxRetries labels a message failed because its transient errors
// reached the retry limit.
const reasonMaxRetries = "max_retries"

// FailureReason is a short, stable label for a failed message, used as a
// metric label.
func FailureReason(err error) string {
	for _, r := range failureReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return reasonMaxRetries
}

// FailureReasons returns every label FailureReason can return, so that the
// metric can be created with all of them at zero before the first failure.
func FailureReasons() []string {
	out := make([]string, 0, len(failureReasons)+1)
	for _, r := range failureReasons {
		out = append(out, r.reason)
	}
	return append(out, reasonMaxRetries)
}
