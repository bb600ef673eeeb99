// Package config holds the order service's configuration.
package config

import (
	"errors"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
)

// Config is everything the order service reads from the environment.
type Config struct {
	Platform platform.Config
	HTTPAddr string `env:"HTTP_ADDR" default:":8081" usage:"listen address of the order service"`
	DBName   string `env:"MYSQL_DATABASE" default:"oncemall_order" usage:"the order service's own database (created if missing)"`
	// Outbox tunes the relay that publishes order.created and order.paid
	// (OUTBOX_* variables).
	Outbox outbox.Config
	// Inbox tunes the payment.succeeded consumer (INBOX_* variables).
	Inbox inbox.Settings

	// Products configures the catalog and its batch copy (product.go).
	Products Products
	// Idempotency configures the Idempotency-Key layer on POST /orders
	// (IDEMPOTENCY_* variables).
	Idempotency idempotency.Config
	// IdempotencyGuard selects the entry guard of POST /orders: fixed (the
	// Idempotency-Key middleware) or broken (check-then-act, incident 4
	// reproduced; see idempotency.BrokenCheckThenAct).
	IdempotencyGuard string `env:"ORDER_IDEMPOTENCY_GUARD" default:"fixed" usage:"entry guard of POST /orders: fixed (Idempotency-Key middleware) or broken (check-then-act, reproduces incident 4, lab only)"`
	// FormTokenTTL is how long a one-time form token from GET /orders/token
	// stays usable.
	FormTokenTTL time.Duration `env:"FORM_TOKEN_TTL" default:"10m" usage:"lifetime of a one-time form token issued by GET /orders/token"`

	// Events names the streams and subjects of order.* and payment.* (the
	// product stream has its own settings in Products).
	Events Events
}

// Load reads the configuration from the environment and validates it.
func Load() (Config, error) { return pkgconfig.LoadValid[Config]() }

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Platform.Validate(),
		pkgconfig.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		database.CheckName("MYSQL_DATABASE", c.DBName),
		c.Outbox.Validate(),
		c.Idempotency.Validate(),
		pkgconfig.CheckOneOf("ORDER_IDEMPOTENCY_GUARD", c.IdempotencyGuard, idempotency.GuardFixed, idempotency.GuardBroken),
		pkgconfig.CheckPositive("FORM_TOKEN_TTL", c.FormTokenTTL),
		pkgconfig.CheckPositive("INBOX_WORKERS", c.Inbox.Workers),
		pkgconfig.CheckPositive("INBOX_MAX_DELIVER", c.Inbox.MaxDeliver),
		pkgconfig.CheckPositive("INBOX_ACK_WAIT", c.Inbox.AckWait),
		c.Products.Validate(),
		c.Events.Validate(),
	)
}
