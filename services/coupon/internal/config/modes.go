package config

import (
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
)

// Modes are the code paths of the incidents this service reproduces, in one
// place. Each is variant.Fixed unless set otherwise, and the platform
// refuses to start with any other value unless ONCEMALL_ENV=lab.
type Modes struct {
	// Deduction is incident 1's coupon deduction: internal/app's
	// deduct_fixed.go, or lab's deduct_broken.go (lab.Plug).
	Deduction variant.Mode `env:"COUPON_DEDUCTION_MODE" default:"fixed" usage:"coupon deduction code path: fixed, or broken (incident 1 reproduction, lab only)"`
}

// Validate refuses a mode no code path answers to.
func (m Modes) Validate() error {
	return pkgconfig.CheckOneOf("COUPON_DEDUCTION_MODE", m.Deduction, app.DeductionModes...)
}
