package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// JSONContentType is the Content-Type of the create-order response: the
// body is written as built inside the transaction, byte for byte, so a
// replayed response and the first one are identical.
const JSONContentType = "application/json"

// lineJSON is one item of POST /orders: a product and how many, nothing
// else. A price or a name in the request is an unknown field, refused with
// 400 naming it: prices come from the catalog.
type lineJSON struct {
	ProductID uint64 `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

// CreateOrderRequest is the body of POST /orders.
type CreateOrderRequest struct {
	Items    []lineJSON `json:"items"`
	CouponID *uint64    `json:"coupon_id,omitempty"`
}

// ItemJSON is an order item as the API shows it: the catalog's name and
// unit price when the order was placed.
type ItemJSON struct {
	ProductID uint64 `json:"product_id"`
	Name      string `json:"name"`
	UnitPrice int64  `json:"unit_price"`
	Quantity  int    `json:"quantity"`
}

// OrderResponse is an order as the API shows it to its owner. Amounts are
// in cents; PayAmount = TotalAmount - DiscountAmount is what is charged.
type OrderResponse struct {
	OrderNo        string     `json:"order_no"`
	UserID         uint64     `json:"user_id"`
	Status         string     `json:"status"`
	Items          []ItemJSON `json:"items"`
	TotalAmount    int64      `json:"total_amount"`
	DiscountAmount int64      `json:"discount_amount"`
	PayAmount      int64      `json:"pay_amount"`
	CouponID       *uint64    `json:"coupon_id,omitempty"`
	PaymentNo      string     `json:"payment_no,omitempty"`
	PaidAt         *time.Time `json:"paid_at,omitempty"`
	CancelledAt    *time.Time `json:"cancelled_at,omitempty"`
	CancelReason   string     `json:"cancel_reason,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

func toOrderResponse(o order.Order) OrderResponse {
	r := OrderResponse{
		OrderNo: o.No, UserID: o.UserID, Status: string(o.Status), Items: make([]ItemJSON, len(o.Items)),
		TotalAmount: o.TotalAmount, DiscountAmount: o.DiscountAmount, PayAmount: o.PayAmount, CouponID: o.CouponID,
		PaymentNo: o.PaymentNo, PaidAt: o.PaidAt, CancelledAt: o.CancelledAt, CancelReason: o.CancelReason,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}
	for i, it := range o.Items {
		r.Items[i] = ItemJSON{ProductID: it.ProductID, Name: it.Name, UnitPrice: it.UnitPrice, Quantity: it.Quantity}
	}
	return r
}

// createOrder serves POST /orders.
func (h *API) createOrder(c *gin.Context) {
	user, ok := userID(c)
	if !ok {
		return
	}
	var req CreateOrderRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	cmd := app.CreateOrder{UserID: user, CouponID: req.CouponID, Lines: make([]order.Line, len(req.Items))}
	cmd.IdempotencyKey, _ = idempotency.KeyFromContext(c.Request.Context())
	for i, it := range req.Items {
		cmd.Lines[i] = order.Line{ProductID: it.ProductID, Quantity: it.Quantity}
	}
	// The response body is built inside the transaction, from the order as
	// committed, so that CompleteInTx stores exactly what the client
	// receives.
	var body []byte
	_, err := h.app.CreateOrder(c.Request.Context(), cmd, func(ctx context.Context, tx order.Tx, o order.Order) error {
		var err error
		if body, err = json.Marshal(toOrderResponse(o)); err != nil {
			return err
		}
		// The Location is set before the response is recorded, so a replay
		// repeats it.
		c.Header("Location", "/orders/"+o.No)
		if h.opts.CompleteInTx != nil {
			return h.opts.CompleteInTx(ctx, tx, http.StatusCreated, body)
		}
		return nil
	})
	if err != nil {
		c.Writer.Header().Del("Location") // the order it named rolled back
		h.fail(c, err)
		return
	}
	c.Data(http.StatusCreated, JSONContentType, body)
}

// OrderListResponse is a page of GET /orders: the caller's orders, newest
// first, and Next, the before= of the next page when this one is full.
type OrderListResponse struct {
	Orders []OrderResponse `json:"orders"`
	Next   string          `json:"next,omitempty"`
}

// listOrders serves GET /orders?before=&limit=: the verified caller's
// orders, newest first, a page at a time.
func (h *API) listOrders(c *gin.Context) {
	user, ok := userID(c)
	if !ok {
		return
	}
	limit, err := optionalUint(c.Query("limit"))
	if err != nil || limit > app.MaxOrdersPage {
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("limit must be a number from 1 to %d", app.MaxOrdersPage))
		return
	}
	list, err := h.app.ListOrders(c.Request.Context(), user, c.Query("before"), int(limit))
	if err != nil {
		h.fail(c, err)
		return
	}
	out := OrderListResponse{Orders: make([]OrderResponse, len(list))}
	for i, o := range list {
		out.Orders[i] = toOrderResponse(o)
	}
	size := int(limit)
	if size == 0 {
		size = app.DefaultOrdersPage
	}
	if len(list) == size {
		out.Next = list[len(list)-1].No
	}
	c.JSON(http.StatusOK, out)
}

// getOrder serves GET /orders/:no for the order's owner.
func (h *API) getOrder(c *gin.Context) {
	user, ok := userID(c)
	if !ok {
		return
	}
	o, err := h.app.GetOrder(c.Request.Context(), user, c.Param("no"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderResponse(o))
}

// cancelOrder serves POST /orders/:no/cancel for the order's owner: 200
// with the cancelled order (also when it was cancelled before), 409 when it
// is paid, 503 with Retry-After when the payment service could not close
// its charge.
func (h *API) cancelOrder(c *gin.Context) {
	user, ok := userID(c)
	if !ok {
		return
	}
	o, err := h.app.CancelOrder(c.Request.Context(), user, c.Param("no"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderResponse(o))
}

// InternalOrderResponse is GET /internal/orders/:no: what another service
// needs to know of an order (the coupon sweeper: does it exist, is it
// cancelled; the payment service: whose is it, what to charge).
type InternalOrderResponse struct {
	OrderNo   string `json:"order_no"`
	UserID    uint64 `json:"user_id"`
	Status    string `json:"status"`
	PayAmount int64  `json:"pay_amount"`
}

// lookupOrder serves GET /internal/orders/:no.
func (h *API) lookupOrder(c *gin.Context) {
	o, err := h.app.LookupOrder(c.Request.Context(), c.Param("no"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, InternalOrderResponse{OrderNo: o.No, UserID: o.UserID, Status: string(o.Status), PayAmount: o.PayAmount})
}

// AnomalyResponse is one finding of GET /admin/reconcile.
type AnomalyResponse struct {
	Kind      string `json:"kind"`
	OrderNo   string `json:"order_no,omitempty"`
	Status    string `json:"status,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// ProductID and Reservation name the reservation of a stock anomaly.
	ProductID   uint64 `json:"product_id,omitempty"`
	Reservation string `json:"reservation,omitempty"`
}

// ReconcileResponse is the answer of GET /admin/reconcile; Anomalies is
// [] (never null) when every invariant holds.
type ReconcileResponse struct {
	Anomalies []AnomalyResponse `json:"anomalies"`
}

func toAnomalyResponse(a order.Anomaly) AnomalyResponse {
	return AnomalyResponse{Kind: string(a.Kind), OrderNo: a.OrderNo, Status: string(a.Status), MessageID: a.MessageID, Reason: a.Reason,
		ProductID: a.ProductID, Reservation: string(a.Reservation)}
}

// reconcile serves GET /admin/reconcile.
func (h *API) reconcile(c *gin.Context) {
	as, err := h.app.Reconcile(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	out := ReconcileResponse{Anomalies: make([]AnomalyResponse, len(as))}
	for i, a := range as {
		out.Anomalies[i] = toAnomalyResponse(a)
	}
	c.JSON(http.StatusOK, out)
}
