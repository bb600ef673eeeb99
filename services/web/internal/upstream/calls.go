package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
)

// Token is identity's answer to a password grant.
type Token struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
}

// SignIn asks identity for an access token with the password grant.
func (c *Client) SignIn(ctx context.Context, username, password string) (Token, error) {
	var t Token
	_, err := c.do(ctx, call{service: "identity", base: c.urls.Identity, method: http.MethodPost, path: "/token",
		form: url.Values{"grant_type": {"password"}, "username": {username}, "password": {password}}, out: &t})
	return t, err
}

// Product is a catalog entry with its stock.
type Product struct {
	ID        uint64 `json:"id"`
	Brand     string `json:"brand"`
	Name      string `json:"name"`
	Model     string `json:"model"`
	Price     int64  `json:"price"`
	Available int64  `json:"available"`
}

// Products lists brand's live products.
func (c *Client) Products(ctx context.Context, brand string) ([]Product, error) {
	var out struct {
		Products []Product `json:"products"`
	}
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodGet,
		path: "/products?" + url.Values{"brand": {brand}, "limit": {"100"}}.Encode(), out: &out})
	return out.Products, err
}

// Product returns one product.
func (c *Client) Product(ctx context.Context, id uint64) (Product, error) {
	var p Product
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodGet,
		path: "/products/" + strconv.FormatUint(id, 10), out: &p})
	return p, err
}

// Coupon is one of a user's coupons.
type Coupon struct {
	ID         uint64    `json:"id"`
	TemplateID uint64    `json:"template_id"`
	Status     string    `json:"status"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Coupons lists the caller's coupons.
func (c *Client) Coupons(ctx context.Context, who Caller) ([]Coupon, error) {
	var out struct {
		Coupons []Coupon `json:"coupons"`
	}
	_, err := c.do(ctx, call{service: "coupon", base: c.urls.Coupon, method: http.MethodGet,
		path: fmt.Sprintf("/users/%d/coupons", who.UserID), caller: &who, out: &out})
	return out.Coupons, err
}

// Coupon returns one of the caller's coupons.
func (c *Client) Coupon(ctx context.Context, who Caller, id uint64) (Coupon, error) {
	var cp Coupon
	_, err := c.do(ctx, call{service: "coupon", base: c.urls.Coupon, method: http.MethodGet,
		path: "/coupons/" + strconv.FormatUint(id, 10), caller: &who, out: &cp})
	return cp, err
}

// Item is one line of an order to place.
type Item struct {
	ProductID uint64 `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

// Order is an order as the order service shows it.
type Order struct {
	OrderNo string `json:"order_no"`
	Status  string `json:"status"`
	Items   []struct {
		ProductID uint64 `json:"product_id"`
		Name      string `json:"name"`
		UnitPrice int64  `json:"unit_price"`
		Quantity  int    `json:"quantity"`
	} `json:"items"`
	TotalAmount    int64     `json:"total_amount"`
	DiscountAmount int64     `json:"discount_amount"`
	PayAmount      int64     `json:"pay_amount"`
	CouponID       uint64    `json:"coupon_id"`
	PaymentNo      string    `json:"payment_no"`
	CancelReason   string    `json:"cancel_reason"`
	CreatedAt      time.Time `json:"created_at"`
}

// PlaceOrder places the caller's order under Idempotency-Key key: the same
// key gets the same order, however often it is sent.
func (c *Client) PlaceOrder(ctx context.Context, who Caller, key string, items []Item, couponID uint64) (Order, error) {
	body := struct {
		Items    []Item  `json:"items"`
		CouponID *uint64 `json:"coupon_id,omitempty"`
	}{Items: items}
	if couponID != 0 {
		body.CouponID = &couponID
	}
	var o Order
	_, err := c.keyed(ctx, key, call{service: "order", base: c.urls.Order, method: http.MethodPost, path: "/orders",
		caller: &who, json: body, out: &o})
	return o, err
}

// Order returns one of the caller's orders.
func (c *Client) Order(ctx context.Context, who Caller, no string) (Order, error) {
	var o Order
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodGet,
		path: "/orders/" + url.PathEscape(no), caller: &who, out: &o})
	return o, err
}

// Orders returns the caller's newest orders, one page of the order
// service's GET /orders.
func (c *Client) Orders(ctx context.Context, who Caller) ([]Order, error) {
	var out struct {
		Orders []Order `json:"orders"`
	}
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodGet,
		path: "/orders?limit=20", caller: &who, out: &out})
	return out.Orders, err
}

// CancelOrder cancels one of the caller's unpaid orders (again: the same
// answer).
func (c *Client) CancelOrder(ctx context.Context, who Caller, no string) (Order, error) {
	var o Order
	_, err := c.do(ctx, call{service: "order", base: c.urls.Order, method: http.MethodPost,
		path: "/orders/" + url.PathEscape(no) + "/cancel", caller: &who, json: struct{}{}, out: &o})
	return o, err
}

// Payment is an order's payment as the payment service shows it.
type Payment struct {
	OutTradeNo string `json:"out_trade_no"`
	OrderNo    string `json:"order_no"`
	Amount     int64  `json:"amount"`
	Status     string `json:"status"`
}

// Pay creates the payment of the caller's order under Idempotency-Key key,
// which charges it at the platform; one payment per order, whatever the key.
func (c *Client) Pay(ctx context.Context, who Caller, key, orderNo string) (Payment, error) {
	var p Payment
	_, err := c.keyed(ctx, key, call{service: "payment", base: c.urls.Payment, method: http.MethodPost, path: "/payments",
		caller: &who, json: map[string]string{"order_no": orderNo}, out: &p})
	return p, err
}

// Payment returns one of the caller's payments by its out_trade_no.
func (c *Client) Payment(ctx context.Context, who Caller, outTradeNo string) (Payment, error) {
	var p Payment
	_, err := c.do(ctx, call{service: "payment", base: c.urls.Payment, method: http.MethodGet,
		path: "/payments/" + url.PathEscape(outTradeNo), caller: &who, out: &p})
	return p, err
}

// Trade asks the payment platform about the charge of outTradeNo.
func (c *Client) Trade(ctx context.Context, outTradeNo string) (psp.Trade, error) {
	var t psp.Trade
	_, err := c.do(ctx, call{service: "psp", base: c.urls.PSP, method: http.MethodGet,
		path: "/charges?" + url.Values{"out_trade_no": {outTradeNo}}.Encode(), out: &t})
	return t, err
}

// Healthy asks base's /healthz: what the storefront's readiness checks.
func (c *Client) Healthy(ctx context.Context, service, base string) error {
	_, err := c.do(ctx, call{service: service, base: base, method: http.MethodGet, path: "/healthz"})
	return err
}
