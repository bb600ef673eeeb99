package lab

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

// Plug sets on o, in lab mode only, the console's switch of incident 1's
// deduction (deduction_switch.go), starting at the mode cfg selects, and
// its routes; nothing outside lab mode (the configuration refuses a mode
// other than fixed there). cmd/coupon's wire calls it; a fork deletes that
// line and lab/.
func Plug(o *assembly.Options, cfg config.Config) {
	if cfg.Env != platform.EnvLab {
		return
	}
	sw := &deductionSwitch{broken: cfg.Modes.Deduction == variant.Broken}
	o.Deducer, o.Lab = sw, sw.routes
}

// Deducer is the deduction of mode: the incident's for variant.Broken, nil
// (the service's fixed one) otherwise.
func Deducer(mode variant.Mode) app.CouponDeducer {
	if mode == variant.Broken {
		return BrokenDeducer{}
	}
	return nil
}
