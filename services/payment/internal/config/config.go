// Package config holds the payment service's configuration: the only
// package that names its environment variables.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
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
	// Auth is whose access tokens the customer's and the operator's routes
	// accept (AUTH_*): the identity service's.
	Auth auth.Config

	PSPURL       string `env:"PSP_URL" default:"http://127.0.0.1:8090" usage:"base URL of the payment platform (the simulator, psp-sim)"`
	PSPSecret    string `env:"PSP_SECRET" default:"dev-psp-secret-not-for-production" usage:"HMAC-SHA256 key shared with the payment platform; the default works only with ONCEMALL_ENV=dev or lab"`
	PSPNotifyURL string `env:"PSP_NOTIFY_URL" usage:"notify_url sent with each charge; empty lets the platform use its own PSP_CALLBACK_URL"`
	// PSPRefundNotifyURL is to refunds what PSPNotifyURL is to charges.
	PSPRefundNotifyURL string        `env:"PSP_REFUND_NOTIFY_URL" usage:"notify_url sent with each refund request; empty lets the platform use its own PSP_REFUND_CALLBACK_URL"`
	PSPTimeout         time.Duration `env:"PSP_TIMEOUT" default:"5s" usage:"timeout of a call to the platform (charge, close, query, refund)"`
	OrderURL           string        `env:"ORDER_URL" default:"http://127.0.0.1:8081" usage:"base URL of the order service, asked for an order's pay_amount on behalf of its owner"`
	OrderTimeout       time.Duration `env:"ORDER_TIMEOUT" default:"3s" usage:"timeout of a call to the order service"`

	SignatureWindow time.Duration `env:"PAYMENT_CALLBACK_WINDOW" default:"5m" usage:"how far a notification's X-PSP-Timestamp may be from now before it is refused (401)"`
	CallbackLock    bool          `env:"PAYMENT_CALLBACK_LOCK" default:"false" usage:"put a Redis lock on out_trade_no in front of the fixed callback handler (an optimisation for storms; correctness never depends on it)"`
	CallbackLockTTL time.Duration `env:"PAYMENT_CALLBACK_LOCK_TTL" default:"10s" usage:"how long a crashed holder of the callback lock blocks its payment"`

	// The active query (payment-query): WAIT_PAY payments older than
	// QueryAfter and younger than QueryHorizon are asked about. Keep the
	// horizon above the order service's ORDER_PAY_TIMEOUT plus a margin:
	// past it, a payment still waiting is a reconciliation finding.
	QuerySchedule string        `env:"PAYMENT_QUERY_SCHEDULE" default:"@every 30s" usage:"cron spec of the payment-query job, which asks the platform about payments still WAIT_PAY"`
	QueryAfter    time.Duration `env:"PAYMENT_QUERY_AFTER" default:"2m" usage:"how long a payment waits for its notification before the payment-query job asks the platform about it"`
	QueryHorizon  time.Duration `env:"PAYMENT_QUERY_HORIZON" default:"1h" usage:"age at which the payment-query job stops asking and the reconciler reports a payment still WAIT_PAY (longer than PAYMENT_QUERY_AFTER, and than the order service's ORDER_PAY_TIMEOUT)"`
	QueryBatch    int           `env:"PAYMENT_QUERY_BATCH" default:"100" usage:"payments one payment-query run asks about, least recently asked first (1 to 1000)"`

	// Refunds of payments that landed after their order closed
	// (payment-refund).
	RefundSchedule   string        `env:"PAYMENT_REFUND_SCHEDULE" default:"@every 5s" usage:"cron spec of the payment-refund job, which sends pending refund requests to the platform"`
	RefundBatch      int           `env:"PAYMENT_REFUND_BATCH" default:"20" usage:"refund requests one payment-refund run sends (1 to 1000)"`
	RefundLease      time.Duration `env:"PAYMENT_REFUND_LEASE" default:"1m" usage:"how long a claimed refund is hidden from other replicas while its request is under way (longer than PSP_TIMEOUT)"`
	RefundBackoff    time.Duration `env:"PAYMENT_REFUND_BACKOFF" default:"5s" usage:"wait after a failed refund request; doubles per attempt"`
	RefundBackoffMax time.Duration `env:"PAYMENT_REFUND_BACKOFF_MAX" default:"10m" usage:"longest wait between refund requests (at least PAYMENT_REFUND_BACKOFF)"`
	RefundAlertAfter time.Duration `env:"PAYMENT_REFUND_ALERT_AFTER" default:"30m" usage:"age at which the reconciler reports a refund the platform has not confirmed"`

	ReconcileSchedule string        `env:"PAYMENT_RECONCILE_SCHEDULE" default:"@every 1m" usage:"cron spec of the reconciliation job that logs findings and sets payment_reconcile_findings"`
	ReconcileLookback time.Duration `env:"PAYMENT_RECONCILE_LOOKBACK" default:"72h" usage:"how far back reconciliation looks; keep it below the outbox retention of sent rows (7 days)"`
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Config.Validate(),
		c.Idempotency.Validate(),
		c.Modes.Validate(),
		c.Auth.Validate(),
		c.Env.CheckSecret("PSP_SECRET", c.PSPSecret, DevPSPSecret),
		pkgconfig.CheckNotEmpty("PSP_URL", c.PSPURL),
		pkgconfig.CheckNotEmpty("ORDER_URL", c.OrderURL),
		pkgconfig.CheckPositive("PSP_TIMEOUT", c.PSPTimeout),
		pkgconfig.CheckPositive("ORDER_TIMEOUT", c.OrderTimeout),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_WINDOW", c.SignatureWindow),
		pkgconfig.CheckPositive("PAYMENT_CALLBACK_LOCK_TTL", c.CallbackLockTTL),
		pkgconfig.CheckPositive("PAYMENT_RECONCILE_LOOKBACK", c.ReconcileLookback),
		pkgconfig.CheckSchedule("PAYMENT_RECONCILE_SCHEDULE", c.ReconcileSchedule),
		checkURL("PSP_NOTIFY_URL", c.PSPNotifyURL),
		checkURL("PSP_REFUND_NOTIFY_URL", c.PSPRefundNotifyURL),
		pkgconfig.CheckSchedule("PAYMENT_QUERY_SCHEDULE", c.QuerySchedule),
		pkgconfig.CheckPositive("PAYMENT_QUERY_AFTER", c.QueryAfter),
		checkLonger("PAYMENT_QUERY_HORIZON", c.QueryHorizon, "PAYMENT_QUERY_AFTER", c.QueryAfter),
		pkgconfig.CheckRange("PAYMENT_QUERY_BATCH", c.QueryBatch, 1, 1000),
		pkgconfig.CheckSchedule("PAYMENT_REFUND_SCHEDULE", c.RefundSchedule),
		pkgconfig.CheckRange("PAYMENT_REFUND_BATCH", c.RefundBatch, 1, 1000),
		checkLonger("PAYMENT_REFUND_LEASE", c.RefundLease, "PSP_TIMEOUT", c.PSPTimeout),
		pkgconfig.CheckPositive("PAYMENT_REFUND_BACKOFF", c.RefundBackoff),
		checkNotShorter("PAYMENT_REFUND_BACKOFF_MAX", c.RefundBackoffMax, "PAYMENT_REFUND_BACKOFF", c.RefundBackoff),
		pkgconfig.CheckPositive("PAYMENT_REFUND_ALERT_AFTER", c.RefundAlertAfter),
	)
}

// checkURL reports a value that is neither empty (the platform's default)
// nor an absolute http(s) URL, naming its variable.
func checkURL(varName, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &pkgconfig.Error{Var: varName, Value: v, Err: errors.New("want empty or an absolute http or https URL")}
	}
	return nil
}

// checkLonger reports d unless it is longer than other (the variable
// otherName), naming d's variable.
func checkLonger(varName string, d time.Duration, otherName string, other time.Duration) error {
	if d <= other {
		return &pkgconfig.Error{Var: varName, Value: d.String(), Err: fmt.Errorf("must be longer than %s (%s)", otherName, other)}
	}
	return nil
}

// checkNotShorter reports d if it is shorter than other (the variable
// otherName), naming d's variable.
func checkNotShorter(varName string, d time.Duration, otherName string, other time.Duration) error {
	if d < other {
		return &pkgconfig.Error{Var: varName, Value: d.String(), Err: fmt.Errorf("must be at least %s (%s)", otherName, other)}
	}
	return nil
}

// App is the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{
		NotifyURL:         c.PSPNotifyURL,
		RefundNotifyURL:   c.PSPRefundNotifyURL,
		CallbackLock:      c.CallbackLock,
		CallbackLockTTL:   c.CallbackLockTTL,
		QueryAfter:        c.QueryAfter,
		QueryHorizon:      c.QueryHorizon,
		QueryBatch:        c.QueryBatch,
		RefundBatch:       c.RefundBatch,
		RefundLease:       c.RefundLease,
		RefundBackoff:     c.RefundBackoff,
		RefundBackoffMax:  c.RefundBackoffMax,
		RefundAlertAfter:  c.RefundAlertAfter,
		ReconcileLookback: c.ReconcileLookback,
	}
}
