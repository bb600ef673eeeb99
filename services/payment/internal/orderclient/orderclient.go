// Package orderclient reads orders from the order service over HTTP: the one
// synchronous call the payment service makes to it when a user pays,
// because a user waits for the payment to be created and its amount must
// come from the order, never from the client.
package orderclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Client calls GET {baseURL}/internal/orders/{order_no}, the route the
// order service keeps for the other services.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the order service at baseURL that presents token
// (INTERNAL_TOKEN) as a bearer token, as every call between the services
// does.
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: hc}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/internal/orders/"+url.PathEscape(orderNo), nil)
	if err != nil {
		return payment.Order{}, err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return payment.Order{}, fmt.Errorf("%w: get order %s: %w", payment.ErrOrderServiceUnavailable, orderNo, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return payment.Order{}, payment.ErrOrderNotFound
	case resp.StatusCode != http.StatusOK:
		return payment.Order{}, fmt.Errorf("%w: get order %s: order service answered %d", payment.ErrOrderServiceUnavailable, orderNo, resp.StatusCode)
	}
	var o orderResponse
	if err := json.Unmarshal(raw, &o); err != nil {
		return payment.Order{}, fmt.Errorf("%w: get order %s: decode: %w", payment.ErrOrderServiceUnavailable, orderNo, err)
	}
	if o.OrderNo != orderNo {
		return payment.Order{}, fmt.Errorf("%w: get order %s: order service answered order %q", payment.ErrOrderServiceUnavailable, orderNo, o.OrderNo)
	}
	if o.UserID != userID {
		return payment.Order{}, payment.ErrOrderNotFound
	}
	return payment.Order{OrderNo: o.OrderNo, UserID: o.UserID, PayAmount: o.PayAmount, Status: o.Status}, nil
}
