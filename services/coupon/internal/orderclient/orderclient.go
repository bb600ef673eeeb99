// Package orderclient asks the order service what became of an order
// (GET /internal/orders/{no}, with the internal token): the one call the
// coupon service makes to another service, for the lock sweeper.
package orderclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncemall/oncemall/pkg/peer"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Client calls the order service at a base URL.
type Client struct{ peer *peer.Client }

// New returns a client of the order service at baseURL that presents token
// (INTERNAL_TOKEN) as a bearer token; hc carries the timeout.
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{peer.New(baseURL, token, hc)}
}

// orderResponse is the part of the order service's answer the sweeper
// reads.
type orderResponse struct {
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
}

// OrderState implements app.Orders. A 404 is "no such order" only when it
// is a problem document: a 404 of anything else (a wrong ORDER_URL, a proxy
// in the way) says nothing about the order, and taking it for "not found"
// would release locks of orders that exist. A transport error or a 5xx is
// coupon.ErrOrderServiceUnavailable; any other answer is an error about
// this order.
func (c *Client) OrderState(ctx context.Context, orderNo string) (coupon.OrderState, error) {
	a, err := c.peer.Get(ctx, "/internal/orders/"+url.PathEscape(orderNo))
	switch {
	case err != nil:
		return "", fmt.Errorf("get order %s: %w: %w", orderNo, coupon.ErrOrderServiceUnavailable, err)
	case a.Status == http.StatusNotFound && a.IsProblem():
		return coupon.OrderNotFound, nil
	case a.Status >= 500:
		return "", fmt.Errorf("get order %s: %w: answered %d", orderNo, coupon.ErrOrderServiceUnavailable, a.Status)
	case a.Status != http.StatusOK:
		return "", fmt.Errorf("get order %s: order service answered %d %q", orderNo, a.Status, a.Excerpt())
	}
	var o orderResponse
	if err := a.Decode(&o); err != nil {
		return "", fmt.Errorf("get order %s: %w", orderNo, err)
	}
	if o.OrderNo != orderNo {
		return "", fmt.Errorf("get order %s: order service answered order %q", orderNo, o.OrderNo)
	}
	switch s := coupon.OrderState(o.Status); s {
	case coupon.OrderWaitPay, coupon.OrderPaid, coupon.OrderCancelled:
		return s, nil
	default:
		return "", fmt.Errorf("get order %s: unknown status %q", orderNo, o.Status)
	}
}
