package coupon_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// errAny stands for "some error, no particular sentinel".
var errAny = errors.New("any error")

func TestDecideDeduction(t *testing.T) {
	unused := coupon.Coupon{ID: 7, UserID: 1, Status: coupon.StatusUnused}
	lockedByA := coupon.Coupon{ID: 7, UserID: 1, Status: coupon.StatusLocked, LockedOrderNo: "A"}
	usedHere := coupon.Coupon{ID: 7, UserID: 1, Status: coupon.StatusUsed, LockedOrderNo: "A", UsedOrderNo: "A"}
	tests := []struct {
		name    string
		c       coupon.Coupon
		order   string
		user    uint64
		want    coupon.Decision
		wantErr error
	}{
		{"locked by this order is deducted", lockedByA, "A", 1, coupon.Apply, nil},
		{"used by this order is already done", usedHere, "A", 1, coupon.AlreadyDone, nil},
		{"used by another order is refused", usedHere, "B", 1, 0, coupon.ErrUsedByAnotherOrder},
		{"locked by another order is refused", lockedByA, "B", 1, 0, coupon.ErrNotLockedByOrder},
		{"unused (released, or never locked) is refused", unused, "A", 1, 0, coupon.ErrNotLockedByOrder},
		{"another user's coupon is refused", lockedByA, "A", 2, 0, coupon.ErrWrongOwner},
		{"unknown status is an error", coupon.Coupon{ID: 7, UserID: 1, Status: "LOST"}, "A", 1, 0, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.DecideDeduction(tt.order, tt.user)
			switch {
			case tt.wantErr == errAny && err == nil:
				t.Fatal("no error")
			case tt.wantErr == errAny:
				return
			case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("decision = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUsedByAnotherOrderNamesBothOrders(t *testing.T) {
	c := coupon.Coupon{ID: 7, UserID: 1, Status: coupon.StatusUsed, UsedOrderNo: "FIRST"}
	_, err := c.DecideDeduction("SECOND", 1)
	if err == nil || !coupon.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	want := "coupon already used by another order: coupon 7 was used by order FIRST, not SECOND"
	if err.Error() != want {
		t.Fatalf("reason = %q, want %q", err.Error(), want)
	}
	if got := coupon.FailureReason(err); got != "used_by_another_order" {
		t.Fatalf("FailureReason = %q", got)
	}
}

func TestIsPermanent(t *testing.T) {
	for _, err := range []error{coupon.ErrNotFound, coupon.ErrWrongOwner, coupon.ErrUsedByAnotherOrder, coupon.ErrOrderAlreadyDeducted,
		coupon.ErrNotLockedByOrder, coupon.ErrInvalid} {
		if !coupon.IsPermanent(fmt.Errorf("wrapped: %w", err)) {
			t.Errorf("%v should be permanent", err)
		}
	}
	for _, err := range []error{coupon.ErrConcurrentChange, errors.New("invalid connection")} {
		if coupon.IsPermanent(err) {
			t.Errorf("%v should be transient", err)
		}
	}
}

func TestRetryPolicyBacksOffThenFails(t *testing.T) {
	p := coupon.RetryPolicy{Max: 5, Base: time.Second, Cap: 5 * time.Second}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wantWaits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}
	for i, want := range wantWaits {
		status, next := p.AfterFailure(i+1, now)
		if status != coupon.MessagePending || next.Sub(now) != want {
			t.Fatalf("attempt %d: %s after %s, want PENDING after %s", i+1, status, next.Sub(now), want)
		}
	}
	if status, _ := p.AfterFailure(5, now); status != coupon.MessageFailed {
		t.Fatalf("attempt 5 (the limit): %s, want FAILED", status)
	}
}

func TestIssue(t *testing.T) {
	now := time.Now()
	c, err := coupon.Issue(coupon.Template{ID: 3, ValidDays: 7}, 9, now)
	if err != nil || c.Status != coupon.StatusUnused || c.TemplateID != 3 || c.UserID != 9 || !c.ExpiresAt.Equal(now.Add(7*24*time.Hour)) {
		t.Fatalf("Issue = %+v, %v; want UNUSED, expiring 7 days from now", c, err)
	}
	if _, err := coupon.Issue(coupon.Template{ID: 3, ValidDays: 7}, 0, now); !errors.Is(err, coupon.ErrInvalid) {
		t.Fatalf("user 0: err = %v, want ErrInvalid", err)
	}
	if _, err := coupon.Issue(coupon.Template{ID: 3}, 9, now); !errors.Is(err, coupon.ErrInvalid) {
		t.Fatalf("template without validity: err = %v, want ErrInvalid", err)
	}
}

func TestTemplateValidate(t *testing.T) {
	ok := coupon.Template{Name: "10 off", DiscountAmount: 1000, ValidDays: 30}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []coupon.Template{
		{Name: "", DiscountAmount: 1, ValidDays: 30},
		{Name: "x", DiscountAmount: 0, ValidDays: 30},
		{Name: "x", DiscountAmount: 1, MinOrderAmount: -1, ValidDays: 30},
		{Name: "x", DiscountAmount: 1, ValidDays: 0},
		{Name: "x", DiscountAmount: 1, ValidDays: 3651},
	} {
		if err := bad.Validate(); !errors.Is(err, coupon.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestNewMessage(t *testing.T) {
	now := time.Now()
	m, err := coupon.NewMessage("m1", "o1", 1, 2, now)
	if err != nil || m.Status != coupon.MessagePending || !m.NextRetryAt.Equal(now) {
		t.Fatalf("NewMessage = %+v, %v", m, err)
	}
	for _, args := range [][4]any{{"", "o1", uint64(1), uint64(2)}, {"m1", "", uint64(1), uint64(2)}, {"m1", "o1", uint64(0), uint64(2)}, {"m1", "o1", uint64(1), uint64(0)}} {
		if _, err := coupon.NewMessage(args[0].(string), args[1].(string), args[2].(uint64), args[3].(uint64), now); !errors.Is(err, coupon.ErrInvalid) {
			t.Errorf("%v: err = %v, want ErrInvalid", args, err)
		}
	}
}

func TestDecideLock(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tpl := coupon.Template{ID: 3, DiscountAmount: 1000, MinOrderAmount: 5000}
	unused := coupon.Coupon{ID: 7, TemplateID: 3, UserID: 1, Status: coupon.StatusUnused, ExpiresAt: now.Add(time.Hour)}
	lockedByA := unused
	lockedByA.Status, lockedByA.LockedOrderNo = coupon.StatusLocked, "A"
	usedByA := lockedByA
	usedByA.Status, usedByA.UsedOrderNo = coupon.StatusUsed, "A"
	expired := unused
	expired.ExpiresAt = now
	expiredLockedByA := lockedByA
	expiredLockedByA.ExpiresAt = now.Add(-time.Hour)
	req := func(order string, user uint64, amount int64) coupon.LockRequest {
		return coupon.LockRequest{OrderNo: order, UserID: user, OrderAmount: amount}
	}
	tests := []struct {
		name    string
		c       coupon.Coupon
		r       coupon.LockRequest
		want    coupon.Decision
		wantErr error
	}{
		{"unused, the owner's, at the minimum", unused, req("A", 1, 5000), coupon.Apply, nil},
		{"another user's coupon", unused, req("A", 2, 5000), 0, coupon.ErrWrongOwner},
		{"below the minimum", unused, req("A", 1, 4999), 0, coupon.ErrBelowMinimum},
		{"expired at this instant", expired, req("A", 1, 5000), 0, coupon.ErrExpired},
		{"locked by another order", lockedByA, req("B", 1, 5000), 0, coupon.ErrNotAvailable},
		{"used by another order", usedByA, req("B", 1, 5000), 0, coupon.ErrNotAvailable},
		{"locked by this order: the same lock", lockedByA, req("A", 1, 5000), coupon.AlreadyDone, nil},
		{"used by this order: the same lock", usedByA, req("A", 1, 5000), coupon.AlreadyDone, nil},
		{"locked by this order before it expired: the same lock", expiredLockedByA, req("A", 1, 5000), coupon.AlreadyDone, nil},
		{"the holder's retry under another user", lockedByA, req("A", 2, 5000), 0, coupon.ErrWrongOwner},
		{"unknown status", coupon.Coupon{ID: 7, UserID: 1, Status: "LOST"}, req("A", 1, 5000), 0, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.DecideLock(tpl, tt.r, now)
			switch {
			case tt.wantErr == errAny && err == nil:
				t.Fatal("no error")
			case tt.wantErr == errAny:
				return
			case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("decision = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAnOrderIsNeverFree: without a minimum, the order must still be above
// the discount.
func TestAnOrderIsNeverFree(t *testing.T) {
	now := time.Now()
	tpl := coupon.Template{DiscountAmount: 1000}
	c := coupon.Coupon{UserID: 1, Status: coupon.StatusUnused, ExpiresAt: now.Add(time.Hour)}
	for amount, want := range map[int64]error{999: coupon.ErrBelowMinimum, 1000: coupon.ErrBelowMinimum, 1001: nil} {
		if _, err := c.DecideLock(tpl, coupon.LockRequest{OrderNo: "A", UserID: 1, OrderAmount: amount}, now); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("amount %d: err = %v, want %v", amount, err, want)
		}
	}
}

func TestLockRequestValidate(t *testing.T) {
	if err := (coupon.LockRequest{OrderNo: "A", UserID: 1, OrderAmount: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []coupon.LockRequest{
		{OrderNo: "", UserID: 1, OrderAmount: 1},
		{OrderNo: string(make([]byte, 65)), UserID: 1, OrderAmount: 1},
		{OrderNo: "A", UserID: 0, OrderAmount: 1},
		{OrderNo: "A", UserID: 1, OrderAmount: 0},
		{OrderNo: "A", UserID: 1, OrderAmount: -5},
	} {
		if err := bad.Validate(); !errors.Is(err, coupon.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", bad, err)
		}
	}
}

// TestRefusalReasons: every refusal maps to the reason of the contract
// (docs/purchase-flow.md), wrapped or not, and nothing else is a refusal.
func TestRefusalReasons(t *testing.T) {
	for err, want := range map[error]string{
		coupon.ErrNotFound: "not_found", coupon.ErrWrongOwner: "not_owner", coupon.ErrNotAvailable: "not_available",
		coupon.ErrExpired: "expired", coupon.ErrBelowMinimum: "below_minimum", coupon.ErrReleased: "released",
	} {
		if got, ok := coupon.RefusalReason(fmt.Errorf("lock: %w", err)); !ok || got != want {
			t.Errorf("%v: reason %q, %v; want %q", err, got, ok, want)
		}
	}
	for _, err := range []error{coupon.ErrInvalid, coupon.ErrConcurrentChange, errors.New("invalid connection")} {
		if got, ok := coupon.RefusalReason(err); ok {
			t.Errorf("%v is a refusal %q, want none", err, got)
		}
	}
	if got := coupon.RefusalReasons(); fmt.Sprint(got) != "[not_found not_owner not_available expired below_minimum released]" {
		t.Errorf("RefusalReasons() = %v", got)
	}
}

// TestOnlyAnOrderThatNeverCommittedOrWasCancelledReleasesItsLock is the
// sweeper's rule.
func TestOnlyAnOrderThatNeverCommittedOrWasCancelledReleasesItsLock(t *testing.T) {
	for s, want := range map[coupon.OrderState]bool{
		coupon.OrderNotFound: true, coupon.OrderCancelled: true,
		coupon.OrderWaitPay: false, coupon.OrderPaid: false, "REFUNDED": false, "": false,
	} {
		if got := s.ReleasesLock(); got != want {
			t.Errorf("%q.ReleasesLock() = %v, want %v", s, got, want)
		}
	}
}
