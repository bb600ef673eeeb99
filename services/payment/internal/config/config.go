// Package config holds the payment service's configuration.
package config

import (
	"errors"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
)

// Config is everything the payment service reads from the environment.
type Config struct {
	Platform    platform.Config
	Idempotency idempotency.Config
	// Outbox tunes the relay that publishes payment.succeeded (OUTBOX_*).
	Outbox   outbox.Config
	HTTPAddr string `env:"HTTP_ADDR" default:":8083" usage:"listen address of the payment service"`
	DBName   string `env:"MYSQL_DATABASE" default:"oncemall_payment" usage:"the payment service's own database (created if missing)"`

	PSPURL       string        `env:"PSP_URL" default:"http://127.0.0.1:8090" usage:"base URL of the payment platform (the simulator, psp-sim)"`
	PSPSecret    string        `env:"PSP_SECRET" default:"dev-psp-secret-not-for-production" usage:"HMAC-SHA256 key shared with the payment platform (the default is for local development only)"`
	PSPNotifyURL string        `env:"PSP_NOTIFY_URL" usage:"notify_url sent with each charge; empty lets the platform use its own PSP_CALLBACK_URL"`
	PSPTimeout   time.Duration `env:"PSP_TIMEOUT" default:"5s" usage:"timeout of a charge call to the platform"`
	OrderURL     string        `env:"ORDER_URL" default:"http://127.0.0.1:8081" usage:"base URL of the order service, asked for an order's amount"`
	OrderTimeout time.Duration `env:"ORDER_TIMEOUT" default:"3s" usage:"timeout of a call to the order service"`

	CallbackMode    string        `env:"PAYMENT_CALLBACK_MODE" default:"fixed" usage:"platform callback handler: fixed, or broken to reproduce incident 2 (never in production)"`
	SignatureWindow time.Duration `env:"PAYMENT_CALLBACK_WINDOW" default:"5m" usage:"how far a notification's X-PSP-Timestamp may be from now before it is refused (401)"`
	CallbackLock    bool          `env:"PAYMENT_CALLBACK_LOCK" default:"false" usage:"put a Redis lock on out_trade_no in front of the fixed callback handler (an optimisation for storms; correctness never depends on it)"`
	CallbackLockTTL time.Duration `env:"PAYMENT_CALLBACK_LOCK_TTL" default:"10s" usage:"how long a crashed holder of the callback lock blocks its payment"`

	ReconcileSchedule string        `env:"PAYMENT_RECONCILE_SCHEDULE" default:"@every 1m" usage:"cron spec of the reconciliation job that logs findings and sets payment_reconcile_findings"`
	ReconcileLookback time.Duration `env:"PAYMENT_RECONCILE_LOOKBACK" default:"72h" usage:"how far back reconciliation looks; keep it below the outbox retention of sent rows (7 days)"`

	// The stream payment.succeeded goes to, and the prefix put before the
	// subject. Production keeps the defaults; the end-to-end test sets
	// unique values so that its processes never share a stream with
	// services already running on the same NATS.
	PaymentStream string `env:"PAYMENT_STREAM" default:"PAYMENT" usage:"JetStream stream carrying payment.succeeded (declared if missing)"`
	SubjectPrefix string `env:"EVENT_SUBJECT_PREFIX" default:"" usage:"put before every order.* and payment.* subject, ending in a dot; empty in production, tests set a unique one"`
}

// Load reads the configuration from the environment and validates it.
func Load() (Config, error) { return pkgconfig.LoadValid[Config]() }

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Platform.Validate(),
		c.Idempotency.Validate(),
		c.Outbox.Validate(),
		pkgconfig.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		database.CheckName("MYSQL_DATABASE", c.DBName),
		pkgconfig.CheckNotEmpty("PSP_SECRET", c.PSPSecret),
		pkgconfig.CheckNotEmpty("PSP_URL", c.PSPURL),
		pkgconfig.CheckNotEmpty("ORDER_URL", c.OrderURL),
		pkgconfig.CheckPositive("PSP_TIMEOUT", c.PSPTimeout),
		pkgconfig.CheckPositive("ORDER_TIMEOUT", c.OrderTimeout),
		pkgconfig.CheckOneOf("PAYMENT_CALLBACK_MODE", c.CallbackMode, "fixed", "broken"),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_WINDOW", c.SignatureWindow),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_LOCK_TTL", c.CallbackLockTTL),
		pkgconfig.CheckPositive("PAYMENT_RECONCILE_LOOKBACK", c.ReconcileLookback),
		events.CheckStreamName("PAYMENT_STREAM", c.PaymentStream),
		events.CheckSubjectPrefix("EVENT_SUBJECT_PREFIX", c.SubjectPrefix),
	)
}
