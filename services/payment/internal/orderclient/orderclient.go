// Package orderclient reads orders from the order service over HTTP: the one
// synchronous call the payment service makes, because a user waits for the
// payment to be created and its amount must come from the order, never from
// the client.
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

// Client calls GET {baseURL}/orders/{order_no}.
type Client struct {
	baseURL string
	http    *http.Client
}

// New returns a client of the order service at baseURL.
func New(baseURL string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), http: hc}
}

// orderResponse is the part of the order service's answer the payment
// service reads.
type orderResponse struct {
	OrderNo string `json:"order_no"`
	Amount  int64  `json:"amount"`
	Status  string `json:"status"`
}

// Order returns the order, or payment.ErrOrderNotFound on a 404.
func (c *Client) Order(ctx context.Context, orderNo string) (payment.Order, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/orders/"+url.PathEscape(orderNo), nil)
	if err != nil {
		return payment.Order{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return payment.Order{}, fmt.Errorf("get order %s: %w", orderNo, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return payment.Order{}, payment.ErrOrderNotFound
	case resp.StatusCode != http.StatusOK:
		return payment.Order{}, fmt.Errorf("get order %s: order service answered %d", orderNo, resp.StatusCode)
	}
	var o orderResponse
	if err := json.Unmarshal(raw, &o); err != nil {
		return payment.Order{}, fmt.Errorf("get order %s: decode: %w", orderNo, err)
	}
	if o.OrderNo != orderNo {
		return payment.Order{}, fmt.Errorf("get order %s: order service answered order %q", orderNo, o.OrderNo)
	}
	return payment.Order{OrderNo: o.OrderNo, Amount: o.Amount, Status: o.Status}, nil
}
