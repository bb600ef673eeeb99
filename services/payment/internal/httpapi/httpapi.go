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

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// IdempotencyKeyHeader is the header POST /payments requires.
const IdempotencyKeyHeader = "Idempotency-Key"

// Options are the edge's settings and middleware.
type Options struct {
	Log *slog.Logger
	// User guards the customer's routes (/payments): auth.Middleware,
	// which verifies the bearer token; the handlers take the user only
	// from it (auth.User).
	User gin.HandlerFunc
	// Admin guards the operator routes (GET /admin/reconcile): auth's
	// Operator, an operator's token or the ADMIN_TOKEN bearer check
	// (platform.Wiring.Admin).
	Admin gin.HandlerFunc
	// Internal guards the routes other services call (/internal/…): the
	// INTERNAL_TOKEN bearer check, platform.Wiring.Internal.
	Internal gin.HandlerFunc
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
	app             *app.App
	opts            Options
	callbacks       *prometheus.CounterVec
	refundCallbacks *prometheus.CounterVec
}

// New returns the routes over a with o's settings, and registers the
// callback metrics. It fails when a dependency or the platform secret is
// missing.
func New(a *app.App, o Options) (*API, error) {
	if a == nil || o.Log == nil || o.User == nil || o.Admin == nil || o.Internal == nil {
		return nil, errors.New("httpapi: the app, Log, User, Admin and Internal are required")
	}
	if len(o.Secret) == 0 {
		return nil, errors.New("httpapi: the platform secret is required")
	}
	if o.SignatureWindow <= 0 {
		o.SignatureWindow = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Idempotency == nil {
		o.Idempotency = RequireIdempotencyKey()
	}
	m := metrics.NewSet(o.Registry)
	api := &API{app: a, opts: o,
		callbacks: m.Counters("payment_callbacks_total",
			"Platform payment notifications by handler (fixed, broken) and outcome (processed, duplicate, refunding, bad_signature, stale_timestamp, malformed, unknown_payment, amount_mismatch, conflict, locked, error).", "handler", "outcome"),
		refundCallbacks: m.Counters("payment_refund_callbacks_total",
			"Platform refund notifications by outcome (processed, duplicate, bad_signature, stale_timestamp, malformed, unknown_refund, amount_mismatch, conflict, error).", "outcome"),
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	return api, nil
}

// Register adds the payment routes to r. The user routes verify the token
// before the Idempotency-Key layer, so a request without a verified caller
// stores nothing, and keys are scoped by the verified user.
func (api *API) Register(r gin.IRouter) {
	r.POST("/payments", api.opts.User, api.opts.Idempotency, api.createPayment)
	r.GET("/payments/:no", api.opts.User, api.getPayment)
	r.POST("/payments/callback", api.callback)
	r.POST("/payments/refunds/callback", api.refundCallback)
	r.POST("/internal/orders/:no/close", api.opts.Internal, api.closeOrder)
	r.GET("/admin/reconcile", api.opts.Admin, api.reconcile)
}

// userID is the caller, the user of the token Options.User verified:
// Register puts every route that calls it behind that guard, which New
// requires.
func userID(c *gin.Context) uint64 {
	p, _ := auth.User(c)
	return p.UserID
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
