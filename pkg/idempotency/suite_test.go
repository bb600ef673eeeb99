package idempotency_test

import (
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
)

// TestSuiteOnTheTestApp runs the reusable suite the services run on their
// real endpoints, here on the test app, under both guards, with Redis up
// and with Redis down.
func TestSuiteOnTheTestApp(t *testing.T) {
	eachGuard(t, func(t *testing.T, g guard) {
		for name, opts := range map[string][]appOption{"redis up": {g.opt}, "redis down": {g.opt, withDeadRedis()}} {
			t.Run(name, func(t *testing.T) {
				app := newTestApp(t, opts...)
				app.delay = 20 * time.Millisecond
				idempotencytest.RunSuite(t, idempotencytest.Target{
					Handler: app.handler,
					Request: func(key, caller string, variant int) idempotencytest.Request {
						body := orderBody
						if variant == 1 {
							body = `{"sku":"SKU-1","quantity":7}`
						}
						return app.order(key, caller, body)
					},
					Effects:    app.orders,
					WantStatus: 201,
					Callers:    [2]string{"alice", "bob"},
				})
			})
		}
	})
}
