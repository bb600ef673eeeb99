package lab

import (
	"errors"

	"github.com/oncemall/oncemall/pkg/auth"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
)

// Config is what the switches need beyond the storefront's configuration:
// where the fault proxy's admin API is, and its token and the simulator's. It is read in lab
// mode only, which allows the development values it defaults to.
type Config struct {
	FaultProxyURL   string `env:"FAULTPROXY_ADMIN_URL" default:"http://127.0.0.1:8091" usage:"lab mode: base URL of the MySQL fault proxy's admin API (the coupon service's database path)"`
	FaultProxyToken string `env:"FAULTPROXY_ADMIN_TOKEN" default:"dev-admin-token" usage:"lab mode: the fault proxy's admin token (its ADMIN_TOKEN)"`
	// PSPToken is the simulator's credential for its switches.
	PSPToken string `env:"PSP_ADMIN_TOKEN" default:"dev-psp-admin-token" usage:"lab mode: the payment-platform simulator's token for its switches (its PSP_ADMIN_TOKEN)"`
	// TracesURL is a trace viewer's search page; the switches link to it
	// when it is set.
	TracesURL string `env:"WEB_TRACES_URL" default:"" usage:"lab mode: a trace viewer's search page for the coupon service (e.g. http://localhost:16686/search?service=coupon); empty: no link"`
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	errs := []error{auth.CheckURL("FAULTPROXY_ADMIN_URL", c.FaultProxyURL),
		pkgconfig.CheckNotEmpty("FAULTPROXY_ADMIN_TOKEN", c.FaultProxyToken), pkgconfig.CheckNotEmpty("PSP_ADMIN_TOKEN", c.PSPToken)}
	if c.TracesURL != "" {
		errs = append(errs, auth.CheckURL("WEB_TRACES_URL", c.TracesURL))
	}
	return errors.Join(errs...)
}

// LoadConfig reads the lab's configuration with lookup and validates it.
func LoadConfig(lookup pkgconfig.LookupFunc) (Config, error) {
	var c Config
	if err := pkgconfig.LoadFrom(&c, lookup); err != nil {
		return c, err
	}
	return c, c.Validate()
}
