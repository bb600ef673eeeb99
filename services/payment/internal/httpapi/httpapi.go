// Package httpapi is the payment service's HTTP edge: routes, request and
// response types, the platform callback's verification, and the mapping of
// errors to statuses, in one place (errors.go).
package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
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
	if a == nil || o.Log == nil || o.Admin == nil || o.Internal == nil {
		return nil, errors.New("httpapi: the app, Log, Admin and Internal are required")
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
	callbacks, err := newCallbackCounter(o.Registry)
	if err != nil {
		return nil, err
	}
	refundCallbacks, err := newRefundCallbackCounter(o.Registry)
	if err != nil {
		return nil, err
	}
	return &API{app: a, opts: o, callbacks: callbacks, refundCallbacks: refundCallbacks}, nil
}

// Register adds the payment routes to r. The user routes check X-User-ID
// before the Idempotency-Key layer, so a request without a caller stores
// nothing.
func (api *API) Register(r gin.IRouter) {
	r.POST("/payments", requireUser, api.opts.Idempotency, api.createPayment)
	r.GET("/payments/:no", requireUser, api.getPayment)
	r.POST("/payments/callback", api.callback)
	r.POST("/payments/refunds/callback", api.refundCallback)
	r.POST("/internal/orders/:no/close", api.opts.Internal, api.closeOrder)
	r.GET("/admin/reconcile", api.opts.Admin, api.reconcile)
}

// UserIDHeader names the caller. The gateway in front of the services sets
// it from the authenticated session and strips any copy a client sent;
// this service trusts it, as every oncemall service does.
const UserIDHeader = "X-User-ID"

// userIDKey is where requireUser leaves the caller in the gin context.
const userIDKey = "payment.user_id"

// requireUser refuses a request without a positive integer X-User-ID (400)
// and hands the caller to the handler.
func requireUser(c *gin.Context) {
	id, err := strconv.ParseUint(c.GetHeader(UserIDHeader), 10, 64)
	if err != nil || id == 0 {
		problem.Abort(c, http.StatusBadRequest, UserIDHeader+" header must be a positive integer")
		return
	}
	c.Set(userIDKey, id)
	c.Next()
}

// userID is the caller requireUser accepted.
func userID(c *gin.Context) uint64 { return c.GetUint64(userIDKey) }

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
