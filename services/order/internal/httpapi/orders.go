// Package httpapi is the order service's HTTP interface: request and
// response types, the handlers, and the one place where errors become
// statuses.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// UserIDHeader carries the authenticated user's id. The gateway in front of
// the service authenticates the customer and sets it; the body never names
// the user, so a client cannot order on someone else's behalf by editing
// JSON, and an Idempotency-Key middleware can scope keys per user before
// reading the body.
const UserIDHeader = "X-User-ID"

// Options wires the handlers.
type Options struct {
	// CompleteInTx, when set, is called last inside the create-order
	// transaction with the response about to be sent (201 and its JSON
	// body); an error rolls the order back. It has the signature of
	// idempotency.CompleteInTx, which plugs in here so the Idempotency-Key
	// record completes atomically with the order:
	//
	//	httpapi.New(orders, log, httpapi.Options{CompleteInTx: idempotency.CompleteInTx})
	//
	// and the route is mounted behind the middleware's HandlerInTx, which
	// claims the key in that same insert (cmd/order does).
	CompleteInTx func(ctx context.Context, tx *gorm.DB, status int, body []byte) error
	// Entry runs in front of POST /orders: the Idempotency-Key middleware
	// and the optional one-time form token check.
	Entry []gin.HandlerFunc
	// IssueToken, when set, serves GET /orders/token: a one-time form token
	// that a following POST /orders may present in X-Form-Token.
	IssueToken gin.HandlerFunc
	// AdminToken guards the /admin routes (ADMIN_TOKEN); when empty they
	// refuse every request.
	AdminToken string
}

// JSONContentType is the Content-Type of the create-order response: the
// body is written as built inside the transaction, byte for byte, so a
// replayed response and the first one are identical.
const JSONContentType = "application/json"

// Handler serves the order endpoints.
type Handler struct {
	app  *app.App
	log  *slog.Logger
	opts Options
}

// New returns the handlers over a.
func New(a *app.App, log *slog.Logger, opts Options) *Handler {
	return &Handler{app: a, log: log, opts: opts}
}

// Register mounts the public routes, and the admin routes behind the admin
// token, on r.
func (h *Handler) Register(r gin.IRouter) {
	r.POST("/orders", append(h.opts.Entry, h.CreateOrder)...)
	if h.opts.IssueToken != nil {
		r.GET("/orders/token", h.opts.IssueToken)
	}
	r.GET("/orders/:no", h.GetOrder)
	admin := r.Group("/admin", httpserver.AdminAuth(h.opts.AdminToken))
	admin.GET("/reconcile", h.Reconcile)
}

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

func toResponse(o order.Order) OrderResponse {
	r := OrderResponse{OrderNo: o.No, UserID: o.UserID, Status: string(o.Status), Amount: o.Amount, CouponID: o.CouponID, PaymentNo: o.PaymentNo, PaidAt: o.PaidAt, CreatedAt: o.CreatedAt}
	for _, it := range o.Items {
		r.Items = append(r.Items, itemJSON(it))
	}
	return r
}

// CreateOrder serves POST /orders.
func (h *Handler) CreateOrder(c *gin.Context) {
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
	// committed, so a hook can store exactly what the client receives.
	var body []byte
	ctx := c.Request.Context()
	o, err := h.app.CreateOrder(ctx, cmd, func(tx *gorm.DB, o order.Order) error {
		var err error
		if body, err = json.Marshal(toResponse(o)); err != nil {
			return err
		}
		if h.opts.CompleteInTx != nil {
			return h.opts.CompleteInTx(ctx, tx, http.StatusCreated, body)
		}
		return nil
	})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Location", "/orders/"+o.No)
	c.Data(http.StatusCreated, JSONContentType, body)
}

// GetOrder serves GET /orders/:no.
func (h *Handler) GetOrder(c *gin.Context) {
	o, err := h.app.GetOrder(c.Request.Context(), c.Param("no"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toResponse(o))
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

// Reconcile serves GET /admin/reconcile.
func (h *Handler) Reconcile(c *gin.Context) {
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

// fail maps a use-case error to its status: the one place that does.
func (h *Handler) fail(c *gin.Context, err error) {
	switch {
	case errors.Is(err, idempotency.ErrDuplicateRequest):
		// Another request with this Idempotency-Key committed first; the
		// transaction rolled back and the middleware answers from its record.
		c.Abort()
	case errors.Is(err, order.ErrInvalid):
		problem.Abort(c, http.StatusBadRequest, err.Error())
	case errors.Is(err, order.ErrNotFound):
		problem.Abort(c, http.StatusNotFound, err.Error())
	case errors.Is(err, order.ErrConflict):
		problem.Abort(c, http.StatusConflict, err.Error())
	default:
		h.log.Error("order request failed", "path", c.FullPath(), "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
	}
}
