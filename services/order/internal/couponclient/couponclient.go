// Package couponclient calls the coupon service's internal routes that
// placing an order needs (docs/purchase-flow.md): lock a coupon for an
// order, and release that lock when the order fails. Every call carries
// the internal token.
package couponclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Client calls {baseURL}/internal/coupons/{id}/lock and /release.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the coupon service at baseURL that presents
// token as its bearer token; hc carries the timeout (COUPON_TIMEOUT).
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: hc}
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
	var out lockResponse
	status, raw, err := c.post(ctx, fmt.Sprintf("/internal/coupons/%d/lock", r.CouponID),
		lockRequest{OrderNo: r.OrderNo, UserID: r.UserID, OrderAmount: r.OrderAmount, Attempt: r.Attempt})
	if err != nil {
		return order.CouponLock{}, fmt.Errorf("%w: lock coupon %d: %w", order.ErrUnavailable, r.CouponID, err)
	}
	switch status {
	case http.StatusOK:
	case http.StatusUnprocessableEntity:
		var ref refusal
		if err := json.Unmarshal(raw, &ref); err != nil || ref.Reason == "" {
			return order.CouponLock{}, fmt.Errorf("%w: lock coupon %d: a 422 without a reason: %q", order.ErrUnavailable, r.CouponID, truncate(raw))
		}
		return order.CouponLock{}, &order.CouponRefusedError{CouponID: r.CouponID, Reason: ref.Reason}
	default:
		return order.CouponLock{}, fmt.Errorf("%w: lock coupon %d: coupon service answered %d: %q", order.ErrUnavailable, r.CouponID, status, truncate(raw))
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return order.CouponLock{}, fmt.Errorf("%w: lock coupon %d: decode the answer: %w", order.ErrUnavailable, r.CouponID, err)
	}
	return order.CouponLock{CouponID: out.CouponID, OrderNo: out.OrderNo, DiscountAmount: out.DiscountAmount, LockedUntil: out.LockedUntil}, nil
}

// Release releases the coupon's lock if attempt of order orderNo holds it,
// and reports whether it did: false also when another attempt of the order
// (a concurrent copy of the request) still holds the lock, which stays
// with it.
func (c *Client) Release(ctx context.Context, couponID uint64, orderNo, attempt string) (bool, error) {
	status, raw, err := c.post(ctx, fmt.Sprintf("/internal/coupons/%d/release", couponID), struct {
		OrderNo string `json:"order_no"`
		Attempt string `json:"attempt,omitempty"`
	}{orderNo, attempt})
	if err != nil {
		return false, fmt.Errorf("%w: release coupon %d: %w", order.ErrUnavailable, couponID, err)
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("%w: release coupon %d: coupon service answered %d: %q", order.ErrUnavailable, couponID, status, truncate(raw))
	}
	var out struct {
		Released bool `json:"released"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return false, fmt.Errorf("%w: release coupon %d: decode the answer: %w", order.ErrUnavailable, couponID, err)
	}
	return out.Released, nil
}

// post sends in as JSON to path with the internal token and returns the
// status and at most 1 MiB of the body.
func (c *Client) post(ctx context.Context, path string, in any) (int, []byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer: %w", err)
	}
	return resp.StatusCode, raw, nil
}

// truncate keeps an unexpected answer short enough for an error message.
func truncate(b []byte) string {
	const max = 256
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
