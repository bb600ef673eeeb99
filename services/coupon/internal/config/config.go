// Package config is the coupon service's configuration: the platform's
// shared settings, the lab modes (modes.go) and the service's own settings.
// It is the only package that names environment variables.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Config is everything the coupon service reads from the environment.
type Config struct {
	platform.Config
	Modes Modes

	// The retry job over the local message table.
	RetrySchedule   string        `env:"COUPON_RETRY_SCHEDULE" default:"@every 2s" usage:"cron spec of the pass over pending coupon messages"`
	RetryMax        int           `env:"COUPON_RETRY_MAX" default:"5" usage:"failed attempts before a coupon message is FAILED"`
	RetryBackoff    time.Duration `env:"COUPON_RETRY_BACKOFF" default:"2s" usage:"wait after the first failed attempt; doubles per attempt"`
	RetryBackoffMax time.Duration `env:"COUPON_RETRY_BACKOFF_MAX" default:"5m" usage:"longest wait between attempts"`
	RetryBatch      int           `env:"COUPON_RETRY_BATCH" default:"100" usage:"messages one retry pass claims"`
	RetryWorkers    int           `env:"COUPON_RETRY_WORKERS" default:"8" usage:"messages of a batch a retry pass attempts at once"`
	RetryLease      time.Duration `env:"COUPON_RETRY_LEASE" default:"1m" usage:"how long a claimed message is hidden from other replicas"`

	// The coupon locks orders take when they are placed. A lock must
	// outlast the order's payment deadline with a margin (Validate checks
	// COUPON_LOCK_TTL >= ORDER_PAY_TIMEOUT + COUPON_LOCK_MARGIN), so the
	// sweeper never looks at a lock whose order can still be paid. The
	// coupon service cannot read the order service's setting, so
	// ORDER_PAY_TIMEOUT is declared here too, with the same default.
	PayTimeout       time.Duration `env:"ORDER_PAY_TIMEOUT" default:"15m" usage:"the order service's payment deadline; must equal the order service's ORDER_PAY_TIMEOUT (COUPON_LOCK_TTL is checked against it)"`
	LockTTL          time.Duration `env:"COUPON_LOCK_TTL" default:"45m" usage:"how long a coupon lock lasts before the sweeper asks the order service about its order; at least ORDER_PAY_TIMEOUT + COUPON_LOCK_MARGIN"`
	LockMargin       time.Duration `env:"COUPON_LOCK_MARGIN" default:"10m" usage:"how much longer than ORDER_PAY_TIMEOUT a lock must last: the close job's period, a late payment notification, clock skew"`
	LockHoldLease    time.Duration `env:"COUPON_LOCK_HOLD_LEASE" default:"1m" usage:"how long one attempt of an order holds its order's lock, so a concurrent copy's release leaves it locked; keep it above the order service's HTTP_REQUEST_TIMEOUT plus its 5s release"`
	LockOverdueAfter time.Duration `env:"COUPON_LOCK_OVERDUE_AFTER" default:"30m" usage:"how long past its deadline a lock may stay LOCKED before the reconciler reports it (lock_overdue: the sweeper, the close job or the deduction is stuck)"`
	SweepSchedule    string        `env:"COUPON_SWEEP_SCHEDULE" default:"@every 1m" usage:"cron spec of the coupon-sweep job that releases overdue locks whose order was not found or cancelled"`
	SweepBatch       int           `env:"COUPON_SWEEP_BATCH" default:"100" usage:"overdue locks the sweeper reads per page"`

	// The order service, which the sweeper asks about a lock's order
	// (GET /internal/orders/{no}, with INTERNAL_TOKEN).
	OrderURL     string        `env:"ORDER_URL" default:"http://127.0.0.1:8081" usage:"base URL of the order service, asked by the lock sweeper what became of a lock's order"`
	OrderTimeout time.Duration `env:"ORDER_TIMEOUT" default:"3s" usage:"timeout of a call to the order service"`

	// Auth is whose access tokens the customer's and the operator's routes
	// accept (AUTH_*): the identity service's.
	Auth auth.Config

	// The reconciliation job.
	ReconcileSchedule string `env:"COUPON_RECONCILE_SCHEDULE" default:"@every 1m" usage:"cron spec of the coupon-reconcile job that logs findings and sets coupon_reconcile_findings"`
}

// App returns the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{
		Retry:            coupon.RetryPolicy{Max: c.RetryMax, Base: c.RetryBackoff, Cap: c.RetryBackoffMax},
		ClaimBatch:       c.RetryBatch,
		Workers:          c.RetryWorkers,
		ClaimLease:       c.RetryLease,
		LockTTL:          c.LockTTL,
		LockHoldLease:    c.LockHoldLease,
		SweepBatch:       c.SweepBatch,
		LockOverdueAfter: c.LockOverdueAfter,
	}
}

// Validate reports every unusable setting, the shared ones included, each
// naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Config.Validate(),
		c.Modes.Validate(),
		c.Auth.Validate(),
		pkgconfig.CheckSchedule("COUPON_RETRY_SCHEDULE", c.RetrySchedule),
		pkgconfig.CheckPositive("COUPON_RETRY_MAX", c.RetryMax),
		pkgconfig.CheckPositive("COUPON_RETRY_BACKOFF", c.RetryBackoff),
		checkNotLess("COUPON_RETRY_BACKOFF_MAX", c.RetryBackoffMax, c.RetryBackoff),
		pkgconfig.CheckPositive("COUPON_RETRY_BATCH", c.RetryBatch),
		pkgconfig.CheckPositive("COUPON_RETRY_WORKERS", c.RetryWorkers),
		pkgconfig.CheckPositive("COUPON_RETRY_LEASE", c.RetryLease),
		pkgconfig.CheckPositive("ORDER_PAY_TIMEOUT", c.PayTimeout),
		pkgconfig.CheckPositive("COUPON_LOCK_MARGIN", c.LockMargin),
		checkLockOutlastsPayment(c.LockTTL, c.PayTimeout, c.LockMargin),
		pkgconfig.CheckPositive("COUPON_LOCK_HOLD_LEASE", c.LockHoldLease),
		pkgconfig.CheckPositive("COUPON_LOCK_OVERDUE_AFTER", c.LockOverdueAfter),
		pkgconfig.CheckSchedule("COUPON_SWEEP_SCHEDULE", c.SweepSchedule),
		pkgconfig.CheckPositive("COUPON_SWEEP_BATCH", c.SweepBatch),
		pkgconfig.CheckNotEmpty("ORDER_URL", c.OrderURL),
		pkgconfig.CheckPositive("ORDER_TIMEOUT", c.OrderTimeout),
		pkgconfig.CheckSchedule("COUPON_RECONCILE_SCHEDULE", c.ReconcileSchedule),
	)
}

// checkLockOutlastsPayment refuses a lock deadline that could pass while
// its order can still be paid: the sweeper would then ask about an order
// that is about to pay, and a wrong or early answer (an order service that
// does not know the order yet) would release a lock its payment then finds
// gone.
func checkLockOutlastsPayment(ttl, payTimeout, margin time.Duration) error {
	if ttl < payTimeout+margin {
		return &pkgconfig.Error{Var: "COUPON_LOCK_TTL", Value: ttl.String(), Err: fmt.Errorf(
			"must be at least ORDER_PAY_TIMEOUT (%s) + COUPON_LOCK_MARGIN (%s) = %s", payTimeout, margin, payTimeout+margin)}
	}
	return nil
}

func checkNotLess(name string, v, min time.Duration) error {
	if v < min {
		return &pkgconfig.Error{Var: name, Value: v.String(), Err: fmt.Errorf("must not be less than the base backoff %s", min)}
	}
	return nil
}
