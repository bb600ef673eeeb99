// Package config holds the payment service's configuration: the only
// package that names its environment variables.
package config

import (
	"errors"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/app"
)

// DevPSPSecret is the published development value of PSP_SECRET, shared
// with the simulator's default; only ONCEMALL_ENV=dev or lab accepts it.
const DevPSPSecret = "dev-psp-secret-not-for-production"

// Config is everything the payment service reads from the environment.
type Config struct {
	platform.Config
	// Idempotency is the Idempotency-Key layer of POST /payments.
	Idempotency idempotency.Config
	// Modes are the lab variants (incident 2).
	Modes Modes

	PSPURL       string        `env:"PSP_URL" default:"http://127.0.0.1:8090" usage:"base URL of the payment platform (the simulator, psp-sim)"`
	PSPSecret    string        `env:"PSP_SECRET" default:"dev-psp-secret-not-for-production" usage:"HMAC-SHA256 key shared with the payment platform; the default works only with ONCEMALL_ENV=dev or lab"`
	PSPNotifyURL string        `env:"PSP_NOTIFY_URL" usage:"notify_url sent with each charge; empty lets the platform use its own PSP_CALLBACK_URL"`
	PSPTimeout   time.Duration `env:"PSP_TIMEOUT" default:"5s" usage:"timeout of a charge call to the platform"`
	OrderURL     string        `env:"ORDER_URL" default:"http://127.0.0.1:8081" usage:"base URL of the order service, asked for an order's amount"`
	OrderTimeout time.Duration `env:"ORDER_TIMEOUT" default:"3s" usage:"timeout of a call to the order service"`

	SignatureWindow time.Duration `env:"PAYMENT_CALLBACK_WINDOW" default:"5m" usage:"how far a notification's X-PSP-Timestamp may be from now before it is refused (401)"`
	CallbackLock    bool          `env:"PAYMENT_CALLBACK_LOCK" default:"false" usage:"put a Redis lock on out_trade_no in front of the fixed callback handler (an optimisation for storms; correctness never depends on it)"`
	CallbackLockTTL time.Duration `env:"PAYMENT_CALLBACK_LOCK_TTL" default:"10s" usage:"how long a crashed holder of the callback lock blocks its payment"`

	ReconcileSchedule string        `env:"PAYMENT_RECONCILE_SCHEDULE" default:"@every 1m" usage:"cron spec of the reconciliation job that logs findings and sets payment_reconcile_findings"`
	ReconcileLookback time.Duration `env:"PAYMENT_RECONCILE_LOOKBACK" default:"72h" usage:"how far back reconciliation looks; keep it below the outbox retention of sent rows (7 days)"`
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Config.Validate(),
		c.Idempotency.Validate(),
		c.Modes.Validate(),
		c.Env.CheckSecret("PSP_SECRET", c.PSPSecret, DevPSPSecret),
		pkgconfig.CheckNotEmpty("PSP_URL", c.PSPURL),
		pkgconfig.CheckNotEmpty("ORDER_URL", c.OrderURL),
		pkgconfig.CheckPositive("PSP_TIMEOUT", c.PSPTimeout),
		pkgconfig.CheckPositive("ORDER_TIMEOUT", c.OrderTimeout),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_WINDOW", c.SignatureWindow),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_LOCK_TTL", c.CallbackLockTTL),
		pkgconfig.CheckPositive("PAYMENT_RECONCILE_LOOKBACK", c.ReconcileLookback),
		pkgconfig.CheckSchedule("PAYMENT_RECONCILE_SCHEDULE", c.ReconcileSchedule),
	)
}

// App is the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{
		NotifyURL:         c.PSPNotifyURL,
		Callback:          c.Modes.Callback,
		CallbackLock:      c.CallbackLock,
		CallbackLockTTL:   c.CallbackLockTTL,
		ReconcileLookback: c.ReconcileLookback,
	}
}
