package config

import (
	"errors"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
)

// Orders configures the orders' jobs: closing the orders nobody paid, and
// reconciling.
type Orders struct {
	PayTimeout        time.Duration `env:"ORDER_PAY_TIMEOUT" default:"15m" usage:"how long an order waits for its payment before the order-close job closes it; keep the coupon service's COUPON_LOCK_TTL well above it"`
	CloseSchedule     string        `env:"ORDER_CLOSE_SCHEDULE" default:"@every 1m" usage:"cron spec of the order-close job"`
	CloseBatch        int           `env:"ORDER_CLOSE_BATCH" default:"100" usage:"orders one pass of the order-close job closes at most (1..10000); the rest wait for the next pass"`
	ReconcileSchedule string        `env:"ORDER_RECONCILE_SCHEDULE" default:"@every 1m" usage:"cron spec of the order-reconcile job, which logs findings and sets order_reconcile_findings"`
}

// Validate reports every unusable order setting.
func (o Orders) Validate() error {
	return errors.Join(
		pkgconfig.CheckPositive("ORDER_PAY_TIMEOUT", o.PayTimeout),
		pkgconfig.CheckSchedule("ORDER_CLOSE_SCHEDULE", o.CloseSchedule),
		pkgconfig.CheckRange("ORDER_CLOSE_BATCH", o.CloseBatch, 1, 10000),
		pkgconfig.CheckSchedule("ORDER_RECONCILE_SCHEDULE", o.ReconcileSchedule),
	)
}

// Peers are the services the order service calls, each with the internal
// token (INTERNAL_TOKEN).
type Peers struct {
	CouponURL      string        `env:"COUPON_URL" default:"http://127.0.0.1:8082" usage:"base URL of the coupon service, asked to lock an order's coupon and to release it when the order fails"`
	CouponTimeout  time.Duration `env:"COUPON_TIMEOUT" default:"3s" usage:"timeout of a call to the coupon service"`
	PaymentURL     string        `env:"PAYMENT_URL" default:"http://127.0.0.1:8083" usage:"base URL of the payment service, asked to close an order's charge before the order is closed"`
	PaymentTimeout time.Duration `env:"PAYMENT_TIMEOUT" default:"3s" usage:"timeout of a call to the payment service"`
}

// Validate reports every unusable peer setting.
func (p Peers) Validate() error {
	return errors.Join(
		pkgconfig.CheckNotEmpty("COUPON_URL", p.CouponURL),
		pkgconfig.CheckPositive("COUPON_TIMEOUT", p.CouponTimeout),
		pkgconfig.CheckNotEmpty("PAYMENT_URL", p.PaymentURL),
		pkgconfig.CheckPositive("PAYMENT_TIMEOUT", p.PaymentTimeout),
	)
}
