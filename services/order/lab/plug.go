package lab

import (
	"github.com/oncemall/oncemall/pkg/lab/idempotencylab"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
)

// Optimistic and Orderly are the order service's lab variants beside
// broken (config.Optimistic, config.Orderly).
const (
	Optimistic = config.Optimistic
	Orderly    = config.Orderly
)

// Plug sets on o the broken and optimistic variants cfg's modes name and
// the console's switch for incident 3 (copy_switch.go), and only in the lab
// (ONCEMALL_ENV=lab; the configuration refuses any other mode outside it).
// A fork deletes this package and the one line of cmd/order's wire() that
// calls Plug.
func Plug(o *assembly.Options, cfg config.Config) {
	if cfg.Env != platform.EnvLab {
		return
	}
	plugVariants(o, cfg)
	pool := cfg.Products.Workers
	if o.CopyWorkers > 0 {
		pool = o.CopyWorkers
	}
	sw := newCopySwitch(o.Products, pool)
	o.Products, o.Lab = sw, sw.routes
}

func plugVariants(o *assembly.Options, cfg config.Config) {
	m := cfg.Modes
	if m.OrderIdempotency == variant.Broken {
		o.Guard = idempotencylab.BrokenCheckThenAct
	}
	switch m.ProductCopy {
	case variant.Broken:
		o.Products = CheckThenInsert{}
	case Orderly:
		o.Products, o.CopyWorkers = CheckThenInsert{}, 1
	}
	switch m.Stock {
	case variant.Broken:
		o.Stock = BrokenStock{}
	case Optimistic:
		o.Stock = OptimisticStock{}
	}
	if m.Close == variant.Broken {
		o.Charges = NoChargeClose{}
	}
	if m.Numbering == variant.Broken {
		o.Numbers = PerAttemptOrderNumbers{}
	}
}

// Variants is what Plug sets for modes in the lab, without the console's
// switch.
func Variants(modes config.Modes) assembly.Options {
	var cfg config.Config
	cfg.Env, cfg.Modes = platform.EnvLab, modes
	var o assembly.Options
	plugVariants(&o, cfg)
	return o
}
