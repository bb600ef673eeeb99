// Package coupon is the coupon service's domain: templates, coupons issued to
// users with their state machine (UNUSED -> USED), the deduction ledger, the
// local message table entries that drive deductions, and the Store the domain
// needs (Store and Tx). It imports no web, database or messaging library; the
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

// A coupon starts UNUSED and becomes USED exactly once, by one order.
const (
	StatusUnused Status = "UNUSED"
	StatusUsed   Status = "USED"
)

// Template is what coupons are issued from.
type Template struct {
	ID             uint64
	Name           string
	DiscountAmount int64 // cents
	MinOrderAmount int64 // cents
	CreatedAt      time.Time
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
	}
	return nil
}

// Coupon is one coupon issued to one user.
type Coupon struct {
	ID          uint64
	TemplateID  uint64
	UserID      uint64
	Status      Status
	UsedOrderNo string // set when USED
	Version     uint32
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Issue returns a new UNUSED coupon of template t for userID.
func Issue(t Template, userID uint64, now time.Time) (Coupon, error) {
	if userID == 0 {
		return Coupon{}, fmt.Errorf("%w: user_id must be positive", ErrInvalid)
	}
	return Coupon{TemplateID: t.ID, UserID: userID, Status: StatusUnused, CreatedAt: now, UpdatedAt: now}, nil
}

// Decision is what a deduction request means for a coupon in its current state.
type Decision int

const (
	// Apply: the coupon is UNUSED; deduct it.
	Apply Decision = iota + 1
	// AlreadyDone: the coupon is already USED by this very order, so an
	// earlier attempt committed (even if its caller never heard so); the
	// request succeeds without a second effect.
	AlreadyDone
)

// DecideDeduction is the state machine's answer to "deduct c for orderNo of
// userID". It is only meaningful on a state read inside the transaction that
// then writes the effect (see the fixed deduction).
func (c Coupon) DecideDeduction(orderNo string, userID uint64) (Decision, error) {
	if c.UserID != userID {
		return 0, fmt.Errorf("%w: coupon %d belongs to user %d, not %d", ErrWrongOwner, c.ID, c.UserID, userID)
	}
	switch c.Status {
	case StatusUnused:
		return Apply, nil
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
