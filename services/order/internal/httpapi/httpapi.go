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

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Options wires the handlers.
type Options struct {
	// Log receives the errors that become a 500, once each (nil:
	// slog.Default()).
	Log *slog.Logger
	// User guards the customer's routes (/orders): auth.Middleware, which
	// verifies the bearer token; the handlers take the user only from it
	// (auth.User). Without it they refuse every request.
	User gin.HandlerFunc
	// Admin guards the operator routes (/admin): auth's Operator, an
	// operator's token or the ADMIN_TOKEN; without it they refuse every
	// request.
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
	if o.User == nil {
		o.User = func(c *gin.Context) { problem.Abort(c, http.StatusUnauthorized, "customer routes are not configured") }
	}
	if o.Admin == nil {
		o.Admin = func(c *gin.Context) { problem.Abort(c, http.StatusUnauthorized, "operator routes are not configured") }
	}
	if o.Internal == nil {
		o.Internal = func(c *gin.Context) { problem.Abort(c, http.StatusUnauthorized, "internal routes are not configured") }
	}
	return &API{app: a, opts: o}, nil
}

// Register mounts every route on r: the customer's orders behind
// Options.User, the catalog's reads, the internal routes behind
// Options.Internal and the operator routes behind Options.Admin. The token
// is verified before the Idempotency-Key guard, so a refused request
// stores nothing and keys are scoped by the verified user.
func (h *API) Register(r gin.IRouter) {
	user := r.Group("/orders", h.opts.User)
	var entry []gin.HandlerFunc
	if h.opts.Guard != nil {
		entry = append(entry, h.opts.Guard)
	}
	if h.opts.Tokens != nil {
		entry = append(entry, h.opts.Tokens.Require(auth.Subject, false))
		user.GET("/token", h.opts.Tokens.IssueHandler(auth.Subject))
	}
	user.POST("", append(entry, h.createOrder)...)
	user.GET("", h.listOrders)
	user.GET("/:no", h.getOrder)
	user.POST("/:no/cancel", h.cancelOrder)

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

// userID is the caller, the user of the token Options.User verified;
// without one (a route registered outside the guard) it answers 401 and
// returns false.
func userID(c *gin.Context) (uint64, bool) {
	p, ok := auth.User(c)
	if !ok {
		problem.Abort(c, http.StatusUnauthorized, "a verified access token is required")
		return 0, false
	}
	return p.UserID, true
}
