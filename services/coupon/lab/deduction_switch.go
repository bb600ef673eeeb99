package lab

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
)

// deductionSwitch is the lab service's deduction: incident 1's broken one
// or the fix, swapped at run time by the console (PUT
// /admin/lab/deduction, lab mode only) instead of a restart with
// COUPON_DEDUCTION_MODE. Turning it broken first applies the incident's
// schema (lab/migrations: the ledger without its per-order unique key), on
// which the broken deduction reproduces the incident; the schema stays
// when it is turned back, since the fix holds on it by its code alone.
type deductionSwitch struct {
	mu     sync.Mutex
	broken bool
}

func (s *deductionSwitch) deducer() app.CouponDeducer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return BrokenDeducer{}
	}
	return app.FixedDeducer{}
}

// Mode implements app.CouponDeducer.
func (s *deductionSwitch) Mode() variant.Mode { return s.deducer().Mode() }

// Deduct implements app.CouponDeducer.
func (s *deductionSwitch) Deduct(ctx context.Context, env app.DeductEnv, m coupon.Message) (app.Outcome, error) {
	return s.deducer().Deduct(ctx, env, m)
}

// DeductOnDelivery implements app.DeliveryDeducer: the fix's, or nothing
// while broken (the message lands PENDING for the broken attempt, as with
// COUPON_DEDUCTION_MODE=broken).
func (s *deductionSwitch) DeductOnDelivery(ctx context.Context, tx coupon.Tx, m coupon.Message, now time.Time) (bool, error) {
	if d, ok := s.deducer().(app.DeliveryDeducer); ok {
		return d.DeductOnDelivery(ctx, tx, m, now)
	}
	return false, nil
}

// routes mounts GET and PUT /admin/lab/deduction behind admin.
func (s *deductionSwitch) routes(w *platform.Wiring, admin gin.HandlerFunc, _ *assembly.Parts) {
	w.Routes(func(r gin.IRouter) {
		g := r.Group("/admin/lab/deduction", admin)
		g.GET("", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"mode": s.Mode()}) })
		g.PUT("", func(c *gin.Context) {
			var in struct {
				Mode variant.Mode `json:"mode"`
			}
			if err := c.ShouldBindJSON(&in); err != nil || (in.Mode != variant.Fixed && in.Mode != variant.Broken) {
				problem.Abort(c, http.StatusBadRequest, `give {"mode": "fixed"} or {"mode": "broken"}`)
				return
			}
			if in.Mode == variant.Broken {
				sqlDB, err := w.DB.DB()
				if err == nil {
					err = migrate.Up(c.Request.Context(), sqlDB, labmigrations.Source)
				}
				if err != nil {
					problem.Abort(c, http.StatusInternalServerError, "the incident's schema: "+err.Error())
					return
				}
			}
			s.mu.Lock()
			s.broken = in.Mode == variant.Broken
			s.mu.Unlock()
			c.JSON(http.StatusOK, gin.H{"mode": in.Mode})
		})
	})
}
