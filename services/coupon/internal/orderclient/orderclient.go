// Package orderclient asks the order service what became of an order
// (GET /internal/orders/{no}, with the internal token): the one call the
// coupon service makes to another service, for the lock sweeper.
package orderclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Client calls the order service at a base URL.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the order service at baseURL that presents token
// (INTERNAL_TOKEN) as a bearer token; hc carries the timeout.
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: hc}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/internal/orders/"+url.PathEscape(orderNo), nil)
	if err != nil {
		return "", fmt.Errorf("get order %s: %w", orderNo, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("get order %s: %w: %w", orderNo, coupon.ErrOrderServiceUnavailable, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("get order %s: read answer: %w: %w", orderNo, coupon.ErrOrderServiceUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && isProblem(resp.Header.Get("Content-Type")):
		return coupon.OrderNotFound, nil
	case resp.StatusCode >= 500:
		return "", fmt.Errorf("get order %s: %w: answered %d", orderNo, coupon.ErrOrderServiceUnavailable, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("get order %s: order service answered %d %q", orderNo, resp.StatusCode, truncate(raw, 200))
	}
	var o orderResponse
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("get order %s: decode: %w", orderNo, err)
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

func isProblem(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == problem.ContentType
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
