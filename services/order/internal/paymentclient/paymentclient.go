// Package paymentclient calls the payment service's internal route that
// closing an order needs (docs/purchase-flow.md): close the order's charge
// before the order is closed. Every call carries the internal token.
package paymentclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncemall/oncemall/pkg/peer"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Client calls POST {baseURL}/internal/orders/{no}/close.
type Client struct{ peer *peer.Client }

// New returns a client of the payment service at baseURL that presents
// token as its bearer token; hc carries the timeout (PAYMENT_TIMEOUT).
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{peer.New(baseURL, token, hc)}
}

// CloseCharge asks the payment service to close order orderNo's charge and
// returns its outcome, order.ChargeClosed or order.ChargePaid. Anything
// else (no answer, another status, another outcome) wraps
// order.ErrUnavailable: the order must not be closed on it.
func (c *Client) CloseCharge(ctx context.Context, orderNo string) (order.ChargeOutcome, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: close the charge of order %s: "+format, append([]any{order.ErrUnavailable, orderNo}, args...)...)
	}
	a, err := c.peer.Post(ctx, "/internal/orders/"+url.PathEscape(orderNo)+"/close", struct{}{})
	if err != nil {
		return "", fail("%w", err)
	}
	if a.Status != http.StatusOK {
		return "", fail("payment service answered %d: %q", a.Status, a.Excerpt())
	}
	var out struct {
		Outcome order.ChargeOutcome `json:"outcome"`
	}
	if err := a.Decode(&out); err != nil {
		return "", fail("%w", err)
	}
	if out.Outcome != order.ChargeClosed && out.Outcome != order.ChargePaid {
		return "", fail("unknown outcome %q", out.Outcome)
	}
	return out.Outcome, nil
}
