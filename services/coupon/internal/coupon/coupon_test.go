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
	usedHere := coupon.Coupon{ID: 7, UserID: 1, Status: coupon.StatusUsed, UsedOrderNo: "A"}
	tests := []struct {
		name    string
		c       coupon.Coupon
		order   string
		user    uint64
		want    coupon.Decision
		wantErr error
	}{
		{"unused is deducted", unused, "A", 1, coupon.Apply, nil},
		{"used by this order is already done", usedHere, "A", 1, coupon.AlreadyDone, nil},
		{"used by another order is refused", usedHere, "B", 1, 0, coupon.ErrUsedByAnotherOrder},
		{"another user's coupon is refused", unused, "A", 2, 0, coupon.ErrWrongOwner},
		{"unknown status is an error", coupon.Coupon{ID: 7, UserID: 1, Status: "LOCKED"}, "A", 1, 0, errAny},
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
	for _, err := range []error{coupon.ErrNotFound, coupon.ErrWrongOwner, coupon.ErrUsedByAnotherOrder, coupon.ErrOrderAlreadyDeducted, coupon.ErrInvalid} {
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
	c, err := coupon.Issue(coupon.Template{ID: 3}, 9, now)
	if err != nil || c.Status != coupon.StatusUnused || c.TemplateID != 3 || c.UserID != 9 {
		t.Fatalf("Issue = %+v, %v", c, err)
	}
	if _, err := coupon.Issue(coupon.Template{ID: 3}, 0, now); !errors.Is(err, coupon.ErrInvalid) {
		t.Fatalf("user 0: err = %v, want ErrInvalid", err)
	}
}

func TestTemplateValidate(t *testing.T) {
	ok := coupon.Template{Name: "10 off", DiscountAmount: 1000}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []coupon.Template{
		{Name: "", DiscountAmount: 1},
		{Name: "x", DiscountAmount: 0},
		{Name: "x", DiscountAmount: 1, MinOrderAmount: -1},
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
