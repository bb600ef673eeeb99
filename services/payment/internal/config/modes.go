package config

import (
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
)

// Modes are the payment service's lab variants, one field per incident. A
// value other than fixed runs only with ONCEMALL_ENV=lab: the platform
// refuses it anywhere else.
type Modes struct {
	// Callback is incident 2's notification handler (app.Config.Callback).
	Callback variant.Mode `env:"PAYMENT_CALLBACK_MODE" default:"fixed" usage:"platform callback handler: fixed, or broken to reproduce incident 2 (lab only; needs the lab schema of services/payment/lab/migrations)"`
}

// Validate reports a mode this service does not have, naming its variable.
func (m Modes) Validate() error {
	return pkgconfig.CheckOneOf("PAYMENT_CALLBACK_MODE", m.Callback, variant.Fixed, variant.Broken)
}
