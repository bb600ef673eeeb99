// Package httpapi is the order service's HTTP interface: the routes of the
// orders (the customer's, and the internal view other services read) and of
// the product catalog (reads for everyone, writes for operators), their
// request and response types, and errors.go, the one place where errors
// become statuses (problem+json).
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/formtoken"
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
	// Log receives the errors that become a 500, once each (nil:
	// slog.Default()).
	Log *slog.Logger
	// Admin guards the operator routes (/admin); without it they refuse
	// every request.
	Admin gin.HandlerFunc
	// Internal guards the routes other services call (/internal); without
	// it they refuse every request.
	Internal gin.HandlerFunc
	// Guard runs first in front of POST /orders: the Idempotency-Key
	// middleware (nil: none).
	Guard gin.HandlerFunc
	// CompleteInTx, when set, is called last inside the create-order
	// transaction with the response about to be sent (201 and its JSON
	// body); an error rolls the order back. store.CompleteInTx plugs the
	// Idempotency-Key record in here, so that it completes atomically with
	// the order when the route runs behind idempotency's HandlerInTx.
	CompleteInTx func(ctx context.Context, tx order.Tx, status int, body []byte) error
	// Tokens, when set, issues one-time form tokens (GET /orders/token) and
	// spends the one a POST /orders presents in X-Form-Token, refusing a
	// token spent before; a POST without a token is let through.
	Tokens *formtoken.Store
}

// API serves the order service's routes.
type API struct {
	app  *app.App
	opts Options
}

// New returns the handlers over a.
func New(a *app.App, o Options) (*API, error) {
	if a == nil {
		return nil, errors.New("httpapi: the app is required")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Admin == nil {
		o.Admin = func(c *gin.Context) { problem.Abort(c, http.StatusUnauthorized, "operator routes are not configured") }
	}
	if o.Internal == nil {
		o.Internal = func(c *gin.Context) { problem.Abort(c, http.StatusUnauthorized, "internal routes are not configured") }
	}
	return &API{app: a, opts: o}, nil
}

// Register mounts every route on r: the customer's orders, the catalog's
// reads, the internal routes behind Options.Internal and the operator
// routes behind Options.Admin.
func (h *API) Register(r gin.IRouter) {
	var entry []gin.HandlerFunc
	if h.opts.Guard != nil {
		entry = append(entry, h.opts.Guard)
	}
	if h.opts.Tokens != nil {
		entry = append(entry, h.opts.Tokens.Require(UserIDHeader, false))
		r.GET("/orders/token", h.opts.Tokens.IssueHandler(UserIDHeader))
	}
	r.POST("/orders", append(entry, h.createOrder)...)
	r.GET("/orders/:no", h.getOrder)
	r.POST("/orders/:no/cancel", h.cancelOrder)

	r.GET("/products", h.listProducts)
	r.GET("/products/:id", h.getProduct)

	internal := r.Group("/internal", h.opts.Internal)
	internal.GET("/orders/:no", h.lookupOrder)

	admin := r.Group("/admin", h.opts.Admin)
	admin.GET("/reconcile", h.reconcile)
	admin.POST("/products", h.createProduct)
	admin.DELETE("/products/:id", h.deleteProduct)
	admin.PUT("/products/:id/stock", h.setStock)
	admin.POST("/products/templates", h.createTemplates)
	admin.POST("/products/batch-copy", h.startCopy)
	admin.GET("/products/batch-copy/:job", h.copyProgress)
}

// userID reads the caller from UserIDHeader; without a positive integer
// there it answers 400 and returns false.
func userID(c *gin.Context) (uint64, bool) {
	id, err := strconv.ParseUint(c.GetHeader(UserIDHeader), 10, 64)
	if err != nil || id == 0 {
		problem.Abort(c, http.StatusBadRequest, UserIDHeader+" header must be a positive integer")
		return 0, false
	}
	return id, true
}
