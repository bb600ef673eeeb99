// Package httpapi is the payment service's HTTP edge: routes, request and
// response types, the platform callback's verification, and the mapping of
// domain errors to statuses, in one place (errors.go).
package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// Callback handler modes (PAYMENT_CALLBACK_MODE).
const (
	ModeFixed  = "fixed"
	ModeBroken = "broken"
)

// IdempotencyKeyHeader is the header POST /payments requires.
const IdempotencyKeyHeader = "Idempotency-Key"

// Options wires the routes.
type Options struct {
	App *app.App
	// Secret is the HMAC key shared with the platform.
	Secret []byte
	// SignatureWindow is how far a notification's timestamp may be from now.
	SignatureWindow time.Duration
	// CallbackMode selects the callback handler: ModeFixed or ModeBroken.
	CallbackMode string
	AdminToken   string
	// Idempotency is the Idempotency-Key middleware put in front of
	// POST /payments (pkg/idempotency). When nil, RequireIdempotencyKey only
	// insists on the header; creation stays idempotent per order anyway.
	Idempotency gin.HandlerFunc
	// Lock, when set, is the optional entry layer in front of the fixed
	// handler: a Redis lock on out_trade_no that turns concurrent copies of
	// a notification away (503, retried by the platform) before they reach
	// the database. Correctness never depends on it; when Redis fails the
	// notification goes through unlocked.
	Lock *redislock.Client
	// LockTTL bounds how long a crashed holder blocks its payment (default 10s).
	LockTTL    time.Duration
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Now is the clock for the timestamp window; nil means time.Now.
	Now func() time.Time
}

type handlers struct {
	opts     Options
	callback func(c *gin.Context)
	metrics  *metrics
}

// Register adds the payment routes to e.
func Register(e *gin.Engine, opts Options) error {
	if opts.App == nil || opts.Log == nil || opts.Registerer == nil {
		return errors.New("httpapi: App, Log and Registerer are required")
	}
	if len(opts.Secret) == 0 {
		return errors.New("httpapi: the platform secret is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LockTTL <= 0 {
		opts.LockTTL = 10 * time.Second
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return err
	}
	h := &handlers{opts: opts, metrics: m}
	switch opts.CallbackMode {
	case ModeFixed:
		apply := opts.App.HandlePaid
		if opts.Lock != nil {
			apply = h.locked(apply)
		}
		h.callback = h.handleCallback(ModeFixed, apply)
	case ModeBroken:
		opts.Log.Warn("payment callback handler is the BROKEN variant of incident 2: duplicate notifications record duplicate payments")
		h.callback = h.handleCallback(ModeBroken, opts.App.HandlePaidBroken)
	default:
		return errors.New("httpapi: callback mode must be fixed or broken")
	}
	idem := opts.Idempotency
	if idem == nil {
		idem = RequireIdempotencyKey()
	}
	e.POST("/payments", idem, h.createPayment)
	e.GET("/payments/:no", h.getPayment)
	e.POST("/payments/callback", h.callback)
	e.GET("/admin/reconcile", httpserver.AdminAuth(opts.AdminToken), h.reconcile)
	return nil
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
