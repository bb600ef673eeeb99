// Package couponclient calls the coupon service's internal routes that
// placing an order needs (docs/purchase-flow.md): lock a coupon for an
// order, and release that lock when the order fails. Every call carries
// the internal token.
package couponclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/oncemall/oncemall/pkg/peer"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Client calls {baseURL}/internal/coupons/{id}/lock and /release.
type Client struct{ peer *peer.Client }

// New returns a client of the coupon service at baseURL that presents
// token as its bearer token; hc carries the timeout (COUPON_TIMEOUT).
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{peer.New(baseURL, token, hc)}
}

// lockRequest is the body of POST /internal/coupons/{id}/lock.
type lockRequest struct {
	OrderNo     string `json:"order_no"`
	UserID      uint64 `json:"user_id"`
	OrderAmount int64  `json:"order_amount"`
	Attempt     string `json:"attempt,omitempty"`
}

// lockResponse is its 200 answer.
type lockResponse struct {
	CouponID       uint64    `json:"coupon_id"`
	OrderNo        string    `json:"order_no"`
	DiscountAmount int64     `json:"discount_amount"`
	LockedUntil    time.Time `json:"locked_until"`
}

// refusal is the part of a 422 problem document the order service reads.
type refusal struct {
	Reason string `json:"reason"`
}

// Lock locks r's coupon for r's order. A 422 is the coupon service's
// refusal, returned as *order.CouponRefusedError with its reason; any other
// failure wraps order.ErrUnavailable.
func (c *Client) Lock(ctx context.Context, r order.CouponLockRequest) (order.CouponLock, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: lock coupon %d: "+format, append([]any{order.ErrUnavailable, r.CouponID}, args...)...)
	}
	a, err := c.peer.Post(ctx, fmt.Sprintf("/internal/coupons/%d/lock", r.CouponID),
		lockRequest{OrderNo: r.OrderNo, UserID: r.UserID, OrderAmount: r.OrderAmount, Attempt: r.Attempt})
	if err != nil {
		return order.CouponLock{}, fail("%w", err)
	}
	switch a.Status {
	case http.StatusOK:
	case http.StatusUnprocessableEntity:
		var ref refusal
		if err := a.Decode(&ref); err != nil || ref.Reason == "" {
			return order.CouponLock{}, fail("a 422 without a reason: %q", a.Excerpt())
		}
		return order.CouponLock{}, &order.CouponRefusedError{CouponID: r.CouponID, Reason: ref.Reason}
	default:
		return order.CouponLock{}, fail("coupon service answered %d: %q", a.Status, a.Excerpt())
	}
	var out lockResponse
	if err := a.Decode(&out); err != nil {
		return order.CouponLock{}, fail("%w", err)
	}
	return order.CouponLock{CouponID: out.CouponID, OrderNo: out.OrderNo, DiscountAmount: out.DiscountAmount, LockedUntil: out.LockedUntil}, nil
}

// Release releases the coupon's lock if attempt of order orderNo holds it,
// and reports whether it did: false also when another attempt of the order
// (a concurrent copy of the request) still holds the lock, which stays
// with it.
func (c *Client) Release(ctx context.Context, couponID uint64, orderNo, attempt string) (bool, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: release coupon %d: "+format, append([]any{order.ErrUnavailable, couponID}, args...)...)
	}
	a, err := c.peer.Post(ctx, fmt.Sprintf("/internal/coupons/%d/release", couponID), struct {
		OrderNo string `json:"order_no"`
		Attempt string `json:"attempt,omitempty"`
	}{orderNo, attempt})
	if err != nil {
		return false, fail("%w", err)
	}
	if a.Status != http.StatusOK {
		return false, fail("coupon service answered %d: %q", a.Status, a.Excerpt())
	}
	var out struct {
		Released bool `json:"released"`
	}
	if err := a.Decode(&out); err != nil {
		return false, fail("%w", err)
	}
	return out.Released, nil
}
