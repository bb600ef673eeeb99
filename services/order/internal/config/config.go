// Package config is the order service's configuration: the platform's
// settings every service shares, the lab variants (modes.go), the
// Idempotency-Key layer and form tokens of POST /orders, the orders' jobs
// and the services it calls (orders.go), and the product catalog's batch
// copy (products.go). It is the only package of the service that names
// environment variables; docs/configuration.md lists them all.
package config

import (
	"errors"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
)

// Config is everything the order service reads from the environment.
type Config struct {
	platform.Config
	// Modes are the lab variants of incidents 3 to 6.
	Modes Modes
	// Orders configures the order-close and order-reconcile jobs.
	Orders Orders
	// Peers are the coupon and payment services (COUPON_*, PAYMENT_*).
	Peers Peers
	// Auth is whose access tokens the customer's and the operator's routes
	// accept (AUTH_*): the identity service's.
	Auth auth.Config
	// Idempotency configures the Idempotency-Key layer on POST /orders
	// (IDEMPOTENCY_* variables).
	Idempotency idempotency.Config
	// FormTokenTTL is how long a one-time form token from GET /orders/token
	// stays usable.
	FormTokenTTL time.Duration `env:"FORM_TOKEN_TTL" default:"10m" usage:"lifetime of a one-time form token issued by GET /orders/token"`
	// Products configures the catalog's batch copy (PRODUCT_COPY_*).
	Products Products
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Config.Validate(),
		c.Modes.Validate(),
		c.Orders.Validate(),
		c.Peers.Validate(),
		c.Auth.Validate(),
		c.Idempotency.Validate(),
		pkgconfig.CheckPositive("FORM_TOKEN_TTL", c.FormTokenTTL),
		c.Products.Validate(),
	)
}

// App is the use cases' configuration: the payment deadline
// and the close job's batch, the batch copy's sizes, and the reconciler
// looking back as far as sent outbox rows are kept (OUTBOX_RETENTION).
func (c Config) App() app.Config {
	return app.Config{
		PayTimeout:        c.Orders.PayTimeout,
		CloseBatch:        c.Orders.CloseBatch,
		ChunkSize:         c.Products.ChunkSize,
		MaxAllOrNothing:   c.Products.MaxAllOrNothing,
		ReconcileLookback: c.Outbox.Retention,
	}
}

// FormTokens is the configuration of the one-time form tokens of
// GET /orders/token, kept in Redis under the service's own prefix.
func (c Config) FormTokens() formtoken.Config {
	return formtoken.Config{Prefix: "oncemall:order:formtoken:", TTL: c.FormTokenTTL}
}
