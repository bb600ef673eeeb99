package lab

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

// Plug sets on o the incident variants cfg's modes select, and nothing
// outside lab mode (the configuration refuses a mode other than fixed
// there). cmd/coupon's wire calls it; a fork deletes that line and lab/.
func Plug(o *assembly.Options, cfg config.Config) {
	if cfg.Env != platform.EnvLab {
		return
	}
	o.Deducer = Deducer(cfg.Modes.Deduction)
}

// Deducer is the deduction of mode: the incident's for variant.Broken, nil
// (the service's fixed one) otherwise.
func Deducer(mode variant.Mode) app.CouponDeducer {
	if mode == variant.Broken {
		return BrokenDeducer{}
	}
	return nil
}
