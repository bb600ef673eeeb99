package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// JSONContentType is the Content-Type of the create-order response: the
// body is written as built inside the transaction, byte for byte, so a
// replayed response and the first one are identical.
const JSONContentType = "application/json"

type itemJSON struct {
	ProductID uint64 `json:"product_id"`
	Quantity  int    `json:"quantity"`
	UnitPrice int64  `json:"unit_price"`
}

// CreateOrderRequest is the body of POST /orders: items, or a plain amount
// in cents, and an optional coupon.
type CreateOrderRequest struct {
	Items    []itemJSON `json:"items,omitempty"`
	Amount   int64      `json:"amount,omitempty"`
	CouponID *uint64    `json:"coupon_id,omitempty"`
}

// OrderResponse is an order as the API shows it.
type OrderResponse struct {
	OrderNo   string     `json:"order_no"`
	UserID    uint64     `json:"user_id"`
	Status    string     `json:"status"`
	Amount    int64      `json:"amount"`
	CouponID  *uint64    `json:"coupon_id,omitempty"`
	Items     []itemJSON `json:"items,omitempty"`
	PaymentNo string     `json:"payment_no,omitempty"`
	PaidAt    *time.Time `json:"paid_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

func toOrderResponse(o order.Order) OrderResponse {
	r := OrderResponse{OrderNo: o.No, UserID: o.UserID, Status: string(o.Status), Amount: o.Amount, CouponID: o.CouponID, PaymentNo: o.PaymentNo, PaidAt: o.PaidAt, CreatedAt: o.CreatedAt}
	for _, it := range o.Items {
		r.Items = append(r.Items, itemJSON(it))
	}
	return r
}

// createOrder serves POST /orders.
func (h *Handler) createOrder(c *gin.Context) {
	userID, err := strconv.ParseUint(c.GetHeader(UserIDHeader), 10, 64)
	if err != nil || userID == 0 {
		problem.Abort(c, http.StatusBadRequest, UserIDHeader+" header must be a positive integer")
		return
	}
	var req CreateOrderRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	cmd := app.CreateOrder{UserID: userID, Amount: req.Amount, CouponID: req.CouponID}
	for _, it := range req.Items {
		cmd.Items = append(cmd.Items, order.Item(it))
	}
	// The response body is built inside the transaction, from the order as
	// committed, so that CompleteInTx stores exactly what the client
	// receives.
	var body []byte
	_, err = h.app.CreateOrder(c.Request.Context(), cmd, func(ctx context.Context, tx order.Tx, o order.Order) error {
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

// getOrder serves GET /orders/:no.
func (h *Handler) getOrder(c *gin.Context) {
	o, err := h.app.GetOrder(c.Request.Context(), c.Param("no"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderResponse(o))
}

// AnomalyResponse is one finding of GET /admin/reconcile.
type AnomalyResponse struct {
	Kind      string `json:"kind"`
	OrderNo   string `json:"order_no,omitempty"`
	Status    string `json:"status,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ReconcileResponse is the answer of GET /admin/reconcile; Anomalies is
// [] (never null) when every invariant holds.
type ReconcileResponse struct {
	Anomalies []AnomalyResponse `json:"anomalies"`
}

func toAnomalyResponse(a order.Anomaly) AnomalyResponse {
	return AnomalyResponse{Kind: string(a.Kind), OrderNo: a.OrderNo, Status: string(a.Status), MessageID: a.MessageID, Reason: a.Reason}
}

// reconcile serves GET /admin/reconcile.
func (h *Handler) reconcile(c *gin.Context) {
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
