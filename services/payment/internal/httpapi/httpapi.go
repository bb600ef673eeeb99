// Package httpapi is the payment service's HTTP edge: routes, request and
// response types, the platform callback's verification, and the mapping of
// errors to statuses, in one place (errors.go).
package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// IdempotencyKeyHeader is the header POST /payments requires.
const IdempotencyKeyHeader = "Idempotency-Key"

// Options are the edge's settings and middleware.
type Options struct {
	Log *slog.Logger
	// Admin guards the operator routes (GET /admin/reconcile): the
	// ADMIN_TOKEN bearer check, platform.Wiring.Admin.
	Admin gin.HandlerFunc
	// Idempotency is the Idempotency-Key middleware put in front of
	// POST /payments (pkg/idempotency). When nil, RequireIdempotencyKey only
	// insists on the header; creation stays idempotent per order anyway.
	Idempotency gin.HandlerFunc
	// Secret is the HMAC key shared with the platform (PSP_SECRET).
	Secret []byte
	// SignatureWindow is how far a notification's timestamp may be from now.
	SignatureWindow time.Duration
	// Registry gets the callback metrics.
	Registry prometheus.Registerer
	// Now is the clock for the timestamp window; nil means time.Now.
	Now func() time.Time
}

// API is the payment service's routes over its use cases.
type API struct {
	app       *app.App
	opts      Options
	callbacks *prometheus.CounterVec
}

// New returns the routes over a, and registers the callback metrics. It
// fails when a dependency or the platform secret is missing.
func New(a *app.App, opts Options) (*API, error) {
	if a == nil || opts.Log == nil || opts.Admin == nil {
		return nil, errors.New("httpapi: the app, Log and Admin are required")
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("httpapi: the platform secret is required")
	}
	if opts.SignatureWindow <= 0 {
		opts.SignatureWindow = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Idempotency == nil {
		opts.Idempotency = RequireIdempotencyKey()
	}
	callbacks, err := newCallbackCounter(opts.Registry)
	if err != nil {
		return nil, err
	}
	return &API{app: a, opts: opts, callbacks: callbacks}, nil
}

// Register adds the payment routes to r.
func (api *API) Register(r gin.IRouter) {
	r.POST("/payments", api.opts.Idempotency, api.createPayment)
	r.GET("/payments/:no", api.getPayment)
	r.POST("/payments/callback", api.callback)
	r.GET("/admin/reconcile", api.opts.Admin, api.reconcile)
}

// RequireIdempotencyKey refuses a request without an Idempotency-Key header
// (400). It is the seam where pkg/idempotency's middleware goes; on its own
// it stores nothing.
func RequireIdempotencyKey() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.GetHeader(IdempotencyKeyHeader) == "" {
			problem.Abort(c, http.StatusBadRequest, "the Idempotency-Key header is required")
			return
		}
		c.Next()
	}
}
