// Package orderclient reads orders from the order service over HTTP: the one
// synchronous call the payment service makes to it when a user pays,
// because a user waits for the payment to be created and its amount must
// come from the order, never from the client.
package orderclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncemall/oncemall/pkg/peer"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Client calls GET {baseURL}/internal/orders/{order_no}, the route the
// order service keeps for the other services.
type Client struct{ peer *peer.Client }

// New returns a client of the order service at baseURL that presents token
// (INTERNAL_TOKEN) as a bearer token, as every call between the services
// does.
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{peer.New(baseURL, token, hc)}
}

// orderResponse is the part of the order service's answer the payment
// service reads.
type orderResponse struct {
	OrderNo   string `json:"order_no"`
	UserID    uint64 `json:"user_id"`
	PayAmount int64  `json:"pay_amount"`
	Status    string `json:"status"`
}

// Order returns order orderNo if userID owns it. An order that does not
// exist and one of another user are both payment.ErrOrderNotFound, so a
// caller learns nothing of other users' orders. Any other failure (no
// answer in time, a 5xx, an answer that cannot be read) wraps
// payment.ErrOrderServiceUnavailable. The internal route reads the order's
// row only, not its items, which paying does not need.
func (c *Client) Order(ctx context.Context, userID uint64, orderNo string) (payment.Order, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: get order %s: "+format, append([]any{payment.ErrOrderServiceUnavailable, orderNo}, args...)...)
	}
	a, err := c.peer.Get(ctx, "/internal/orders/"+url.PathEscape(orderNo))
	switch {
	case err != nil:
		return payment.Order{}, fail("%w", err)
	case a.Status == http.StatusNotFound:
		return payment.Order{}, payment.ErrOrderNotFound
	case a.Status != http.StatusOK:
		return payment.Order{}, fail("order service answered %d", a.Status)
	}
	var o orderResponse
	if err := a.Decode(&o); err != nil {
		return payment.Order{}, fail("%w", err)
	}
	if o.OrderNo != orderNo {
		return payment.Order{}, fail("order service answered order %q", o.OrderNo)
	}
	if o.UserID != userID {
		return payment.Order{}, payment.ErrOrderNotFound
	}
	return payment.Order{OrderNo: o.OrderNo, UserID: o.UserID, PayAmount: o.PayAmount, Status: o.Status}, nil
}
