package lab

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/config"
)

// Plug sets on o the broken variants cfg's modes ask for, in lab mode only
// (config refuses a mode other than fixed anywhere else): for
// PAYMENT_CALLBACK_MODE=broken, incident 2's handler (BrokenPaid).
func Plug(o *assembly.Options, cfg config.Config) {
	if cfg.Env != platform.EnvLab {
		return
	}
	if cfg.Modes.Callback == variant.Broken {
		o.Paid = BrokenPaid
	}
}
