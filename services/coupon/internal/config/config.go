// Package config is the coupon service's configuration: the platform's
// shared settings, the lab modes (modes.go) and the service's own settings.
// It is the only package that names environment variables.
package config

import (
	"errors"
	"fmt"
	"time"

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
	RetryLease      time.Duration `env:"COUPON_RETRY_LEASE" default:"1m" usage:"how long a claimed message is hidden from other replicas"`

	// The idempotent records of the coupon.used notification.
	NoticeRetention time.Duration `env:"COUPON_NOTICE_RETENTION" default:"720h" usage:"how long a biz_idempotent_record row stays online before archiving"`
	ArchiveSchedule string        `env:"COUPON_ARCHIVE_SCHEDULE" default:"@every 1h" usage:"cron spec of the idempotent record archive job"`
	ArchiveBatch    int           `env:"COUPON_ARCHIVE_BATCH" default:"500" usage:"records one archive transaction moves"`
}

// App returns the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{
		Deduction:       c.Modes.Deduction,
		Retry:           coupon.RetryPolicy{Max: c.RetryMax, Base: c.RetryBackoff, Cap: c.RetryBackoffMax},
		ClaimBatch:      c.RetryBatch,
		ClaimLease:      c.RetryLease,
		NoticeRetention: c.NoticeRetention,
		ArchiveBatch:    c.ArchiveBatch,
	}
}

// Validate reports every unusable setting, the shared ones included, each
// naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Config.Validate(),
		c.Modes.Validate(),
		pkgconfig.CheckSchedule("COUPON_RETRY_SCHEDULE", c.RetrySchedule),
		pkgconfig.CheckPositive("COUPON_RETRY_MAX", c.RetryMax),
		pkgconfig.CheckPositive("COUPON_RETRY_BACKOFF", c.RetryBackoff),
		checkNotLess("COUPON_RETRY_BACKOFF_MAX", c.RetryBackoffMax, c.RetryBackoff),
		pkgconfig.CheckPositive("COUPON_RETRY_BATCH", c.RetryBatch),
		pkgconfig.CheckPositive("COUPON_RETRY_LEASE", c.RetryLease),
		pkgconfig.CheckPositive("COUPON_NOTICE_RETENTION", c.NoticeRetention),
		pkgconfig.CheckSchedule("COUPON_ARCHIVE_SCHEDULE", c.ArchiveSchedule),
		pkgconfig.CheckPositive("COUPON_ARCHIVE_BATCH", c.ArchiveBatch),
	)
}

func checkNotLess(name string, v, min time.Duration) error {
	if v < min {
		return &pkgconfig.Error{Var: name, Value: v.String(), Err: fmt.Errorf("must not be less than the base backoff %s", min)}
	}
	return nil
}
