// Package app holds the coupon service's use cases, one file each:
//
//	commands: CreateTemplate, IssueCoupon, LandOrderPaid, ProcessDueMessages,
//	          ProcessMessage (deductFixed or deductBroken), ArchiveIdempotentRecords
//	queries:  Template, Coupon, UserCoupons, Reconcile
//
// The deduction of incident 1 lives in deduct_fixed.go and, side by side,
// deduct_broken.go; Config.Mode picks one.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Config tunes the use cases.
type Config struct {
	// Mode selects the deduction: coupon.ModeFixed (default) or the
	// incident's coupon.ModeBroken.
	Mode coupon.Mode
	// Retry is the backoff and retry limit of the local message table.
	Retry coupon.RetryPolicy
	// ClaimBatch is how many due messages one pass of the retry job claims.
	ClaimBatch int
	// ClaimLease is how long a claimed message is hidden from other
	// replicas; it must exceed the time a batch takes.
	ClaimLease time.Duration
	// NoticeRetention is how long an idempotent record of a notification
	// stays online before the archive job may move it.
	NoticeRetention time.Duration
	// ArchiveBatch is how many records one archive transaction moves.
	ArchiveBatch int
}

// DefaultConfig returns working defaults.
func DefaultConfig() Config {
	return Config{
		Mode:            coupon.ModeFixed,
		Retry:           coupon.RetryPolicy{Max: 5, Base: 2 * time.Second, Cap: 5 * time.Minute},
		ClaimBatch:      100,
		ClaimLease:      time.Minute,
		NoticeRetention: 30 * 24 * time.Hour,
		ArchiveBatch:    500,
	}
}

// Validate reports every unusable setting.
func (c Config) Validate() error {
	return errors.Join(
		pkgconfig.CheckOneOf("COUPON_DEDUCTION_MODE", c.Mode, coupon.Modes...),
		pkgconfig.CheckPositive("COUPON_RETRY_MAX", c.Retry.Max),
		pkgconfig.CheckPositive("COUPON_RETRY_BACKOFF", c.Retry.Base),
		checkNotLess("COUPON_RETRY_BACKOFF_MAX", c.Retry.Cap, c.Retry.Base),
		pkgconfig.CheckPositive("COUPON_RETRY_BATCH", c.ClaimBatch),
		pkgconfig.CheckPositive("COUPON_RETRY_LEASE", c.ClaimLease),
		pkgconfig.CheckPositive("COUPON_NOTICE_RETENTION", c.NoticeRetention),
		pkgconfig.CheckPositive("COUPON_ARCHIVE_BATCH", c.ArchiveBatch),
	)
}

func checkNotLess(name string, v, min time.Duration) error {
	if v < min {
		return &pkgconfig.Error{Var: name, Value: v.String(), Err: fmt.Errorf("must not be less than the base backoff %s", min)}
	}
	return nil
}

// App is the coupon service's use cases over a Store.
type App struct {
	store   coupon.Store
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	wake    func()
}

// New returns the use cases. wake, if not nil, is called after a transaction
// that queued an outbox event committed (the relay's Wake), so the event is
// published at once instead of at the relay's next poll. Metrics are
// registered on reg.
func New(store coupon.Store, wake func(), cfg Config, log *slog.Logger, reg prometheus.Registerer) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	if wake == nil {
		wake = func() {}
	}
	return &App{store: store, cfg: cfg, log: log, metrics: m, wake: wake, now: func() time.Time { return time.Now().UTC() }}, nil
}

// Mode reports which deduction the app runs.
func (a *App) Mode() coupon.Mode { return a.cfg.Mode }
