// Package paymentclient calls the payment service's internal route that
// closing an order needs (docs/purchase-flow.md): close the order's charge
// before the order is closed. Every call carries the internal token.
package paymentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Client calls POST {baseURL}/internal/orders/{no}/close.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the payment service at baseURL that presents
// token as its bearer token; hc carries the timeout (PAYMENT_TIMEOUT).
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// CloseCharge asks the payment service to close order orderNo's charge and
// returns its outcome, order.ChargeClosed or order.ChargePaid. Anything
// else (no answer, another status, another outcome) wraps
// order.ErrUnavailable: the order must not be closed on it.
func (c *Client) CloseCharge(ctx context.Context, orderNo string) (order.ChargeOutcome, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/internal/orders/"+url.PathEscape(orderNo)+"/close", bytes.NewReader([]byte("{}")))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: close the charge of order %s: %w", order.ErrUnavailable, orderNo, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("%w: close the charge of order %s: read the answer: %w", order.ErrUnavailable, orderNo, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: close the charge of order %s: payment service answered %d: %.256q", order.ErrUnavailable, orderNo, resp.StatusCode, raw)
	}
	var out struct {
		Outcome order.ChargeOutcome `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("%w: close the charge of order %s: decode the answer: %w", order.ErrUnavailable, orderNo, err)
	}
	if out.Outcome != order.ChargeClosed && out.Outcome != order.ChargePaid {
		return "", fmt.Errorf("%w: close the charge of order %s: unknown outcome %q", order.ErrUnavailable, orderNo, out.Outcome)
	}
	return out.Outcome, nil
}
