// Package config is the storefront's configuration: where the services are,
// how its cookies are set, and the shared logging, HTTP and tracing
// settings. It is the only package that names environment variables.
package config

import (
	"errors"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// DevCookieKey is the published development value of WEB_COOKIE_KEY,
// refused outside dev and lab.
const DevCookieKey = "dev-web-cookie-key"

// Config is everything the storefront reads from the environment.
type Config struct {
	Env      platform.Env `env:"ONCEMALL_ENV" default:"production" usage:"production; dev allows the published development secrets (make run, compose); lab as dev (tests)"`
	HTTPAddr string       `env:"HTTP_ADDR" default:":8085" usage:"listen address of the storefront"`

	Log     logging.Config
	HTTP    httpserver.Config
	Tracing tracing.Config
	// Auth is how the storefront verifies the token in its session cookie:
	// the same issuer and audience as the services it calls.
	Auth auth.Config

	IdentityURL string        `env:"IDENTITY_URL" default:"http://127.0.0.1:8084" usage:"base URL of the identity service (POST /token)"`
	OrderURL    string        `env:"ORDER_URL" default:"http://127.0.0.1:8081" usage:"base URL of the order service (products, orders)"`
	CouponURL   string        `env:"COUPON_URL" default:"http://127.0.0.1:8082" usage:"base URL of the coupon service (the user's coupons)"`
	PaymentURL  string        `env:"PAYMENT_URL" default:"http://127.0.0.1:8083" usage:"base URL of the payment service (POST /payments)"`
	PSPURL      string        `env:"PSP_URL" default:"http://127.0.0.1:8090" usage:"base URL of the payment platform (the simulator): its answer about a charge is the checkout page"`
	Timeout     time.Duration `env:"WEB_UPSTREAM_TIMEOUT" default:"5s" usage:"how long one call to a service may take (keep it below HTTP_REQUEST_TIMEOUT)"`

	Brand        string `env:"WEB_BRAND" default:"demo" usage:"the brand whose products the catalog shows"`
	CookieKey    string `env:"WEB_COOKIE_KEY" default:"dev-web-cookie-key" usage:"secret the CSRF tokens are signed with (16 bytes or more); the default works only with ONCEMALL_ENV=dev or lab"`
	CookieSecure bool   `env:"WEB_COOKIE_SECURE" default:"false" usage:"mark the cookies Secure (sent over HTTPS only): set it behind TLS"`
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	errs := []error{
		pkgconfig.CheckOneOf("ONCEMALL_ENV", c.Env, platform.EnvProduction, platform.EnvDev, platform.EnvLab),
		pkgconfig.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		c.Log.Validate(), c.HTTP.Validate(), c.Tracing.Validate(), c.Auth.Validate(),
		auth.CheckURL("IDENTITY_URL", c.IdentityURL),
		auth.CheckURL("ORDER_URL", c.OrderURL),
		auth.CheckURL("COUPON_URL", c.CouponURL),
		auth.CheckURL("PAYMENT_URL", c.PaymentURL),
		auth.CheckURL("PSP_URL", c.PSPURL),
		pkgconfig.CheckPositive("WEB_UPSTREAM_TIMEOUT", c.Timeout),
		pkgconfig.CheckNotEmpty("WEB_BRAND", c.Brand),
		c.Env.CheckSecret("WEB_COOKIE_KEY", c.CookieKey, DevCookieKey),
	}
	if c.Timeout >= c.HTTP.RequestTimeout {
		errs = append(errs, &pkgconfig.Error{Var: "WEB_UPSTREAM_TIMEOUT", Value: c.Timeout.String(),
			Err: errors.New("must be below HTTP_REQUEST_TIMEOUT, or a slow service leaves no time for the error page")})
	}
	return errors.Join(errs...)
}

// Load reads the configuration from lookup and validates it.
func Load(lookup pkgconfig.LookupFunc) (Config, error) {
	var c Config
	if err := pkgconfig.LoadFrom(&c, lookup); err != nil {
		return c, err
	}
	return c, c.Validate()
}
