// Package config holds the coupon service's configuration.
package config

import (
	"errors"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
)

// Config is everything the coupon service reads from the environment.
type Config struct {
	Platform platform.Config
	HTTPAddr string `env:"HTTP_ADDR" default:":8082" usage:"listen address of the coupon service"`
	DBName   string `env:"MYSQL_DATABASE" default:"oncemall_coupon" usage:"the coupon service's own database (created if missing)"`
	// Outbox tunes the relay that publishes coupon.used (OUTBOX_*).
	Outbox outbox.Config

	// Incident 1: which deduction runs. "broken" reproduces the incident and
	// exists for the lab; never run it for real.
	DeductionMode string `env:"COUPON_DEDUCTION_MODE" default:"fixed" usage:"coupon deduction code path: fixed, or broken (incident 1 reproduction, lab only)"`

	// The order.paid consumer.
	OrderStream     string        `env:"COUPON_ORDER_STREAM" default:"ORDER" usage:"JetStream stream carrying order.> (declared if missing)"`
	OrderStreamSubj string        `env:"COUPON_ORDER_SUBJECT_PREFIX" default:"order" usage:"subject prefix of that stream; order.paid is read as PREFIX.paid"`
	ConsumerName    string        `env:"COUPON_CONSUMER_NAME" default:"coupon-order-paid" usage:"durable consumer name, also the inbox deduplication scope"`
	ConsumerWorkers int           `env:"COUPON_CONSUMER_WORKERS" default:"4" usage:"order.paid handlers running at once per replica"`
	ConsumerDeliver int           `env:"COUPON_CONSUMER_MAX_DELIVER" default:"10" usage:"deliveries of one event before it is recorded dead"`
	ConsumerAckWait time.Duration `env:"COUPON_CONSUMER_ACK_WAIT" default:"30s" usage:"time a handler has before JetStream redelivers the event"`
	EventStream     string        `env:"COUPON_EVENT_STREAM" default:"COUPON" usage:"JetStream stream the coupon service publishes coupon.> to (declared if missing)"`
	EventStreamSubj string        `env:"COUPON_EVENT_SUBJECT_PREFIX" default:"coupon" usage:"subject prefix of the coupon event stream"`
	RetrySchedule   string        `env:"COUPON_RETRY_SCHEDULE" default:"@every 2s" usage:"cron spec of the pass over pending coupon messages"`
	RetryMax        int           `env:"COUPON_RETRY_MAX" default:"5" usage:"failed attempts before a coupon message is FAILED"`
	RetryBackoff    time.Duration `env:"COUPON_RETRY_BACKOFF" default:"2s" usage:"wait after the first failed attempt; doubles per attempt"`
	RetryBackoffMax time.Duration `env:"COUPON_RETRY_BACKOFF_MAX" default:"5m" usage:"longest wait between attempts"`
	RetryBatch      int           `env:"COUPON_RETRY_BATCH" default:"100" usage:"messages one retry pass claims"`
	RetryLease      time.Duration `env:"COUPON_RETRY_LEASE" default:"1m" usage:"how long a claimed message is hidden from other replicas"`
	NoticeRetention time.Duration `env:"COUPON_NOTICE_RETENTION" default:"720h" usage:"how long a biz_idempotent_record row stays online before archiving"`
	ArchiveSchedule string        `env:"COUPON_ARCHIVE_SCHEDULE" default:"@every 1h" usage:"cron spec of the idempotent record archive job"`
	ArchiveBatch    int           `env:"COUPON_ARCHIVE_BATCH" default:"500" usage:"records one archive transaction moves"`
	InboxRetention  time.Duration `env:"COUPON_INBOX_RETENTION" default:"168h" usage:"how long processed order.paid ids are kept for deduplication (at least the ORDER stream's max age)"`
	JobLockTTL      time.Duration `env:"COUPON_JOB_LOCK_TTL" default:"30s" usage:"expiry of the Redis lock that lets one replica run a cron pass at a time (refreshed while it runs)"`
}

// Load reads the configuration from the environment and validates it.
func Load() (Config, error) { return pkgconfig.LoadValid[Config]() }

// App returns the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{
		Mode:            coupon.Mode(c.DeductionMode),
		Retry:           coupon.RetryPolicy{Max: c.RetryMax, Base: c.RetryBackoff, Cap: c.RetryBackoffMax},
		ClaimBatch:      c.RetryBatch,
		ClaimLease:      c.RetryLease,
		NoticeRetention: c.NoticeRetention,
		ArchiveBatch:    c.ArchiveBatch,
	}
}

// Jobs returns the cron schedules.
func (c Config) Jobs() jobs.Config {
	return jobs.Config{RetrySchedule: c.RetrySchedule, ArchiveSchedule: c.ArchiveSchedule, LockTTL: c.JobLockTTL}
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Platform.Validate(),
		c.Outbox.Validate(),
		pkgconfig.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		database.CheckName("MYSQL_DATABASE", c.DBName),
		c.App().Validate(),
		c.Jobs().Validate(),
		pkgconfig.CheckNotEmpty("COUPON_ORDER_STREAM", c.OrderStream),
		pkgconfig.CheckNotEmpty("COUPON_ORDER_SUBJECT_PREFIX", c.OrderStreamSubj),
		pkgconfig.CheckNotEmpty("COUPON_CONSUMER_NAME", c.ConsumerName),
		pkgconfig.CheckNotEmpty("COUPON_EVENT_STREAM", c.EventStream),
		pkgconfig.CheckNotEmpty("COUPON_EVENT_SUBJECT_PREFIX", c.EventStreamSubj),
		pkgconfig.CheckPositive("COUPON_CONSUMER_WORKERS", c.ConsumerWorkers),
		pkgconfig.CheckPositive("COUPON_CONSUMER_MAX_DELIVER", c.ConsumerDeliver),
		pkgconfig.CheckPositive("COUPON_CONSUMER_ACK_WAIT", c.ConsumerAckWait),
		pkgconfig.CheckPositive("COUPON_INBOX_RETENTION", c.InboxRetention),
	)
}
