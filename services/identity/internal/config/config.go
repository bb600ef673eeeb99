// Package config is the identity service's configuration: the platform's
// shared settings and the issuer's own. It is the only package that names
// environment variables.
package config

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/oncemall/oncemall/pkg/auth"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/ratelimit"
	"github.com/oncemall/oncemall/services/identity/internal/app"
)

// DevSigningKey is the published development value of
// IDENTITY_SIGNING_KEY: the base64 of the 32 bytes
// "oncemall-dev-signing-key-32bytes". Outside dev and lab it is refused.
const DevSigningKey = auth.DevSigningKey

// Config is everything the identity service reads from the environment.
type Config struct {
	platform.Config

	Issuer      string        `env:"IDENTITY_ISSUER" default:"http://127.0.0.1:8084" usage:"the issuer URL every token carries in iss; the services' AUTH_ISSUER must equal it"`
	Audiences   []string      `env:"IDENTITY_AUDIENCES" default:"oncemall" usage:"comma-separated audiences a token may be asked for (form field audience); the first is the default"`
	TokenTTL    time.Duration `env:"IDENTITY_TOKEN_TTL" default:"15m" usage:"how long an access token is good for"`
	SigningKey  string        `env:"IDENTITY_SIGNING_KEY" default:"b25jZW1hbGwtZGV2LXNpZ25pbmcta2V5LTMyYnl0ZXM=" usage:"the Ed25519 signing key, the base64 of a 32-byte seed (openssl rand -base64 32); the default works only with ONCEMALL_ENV=dev or lab"`
	RetiredKeys []string      `env:"IDENTITY_RETIRED_KEYS" default:"" usage:"comma-separated base64 Ed25519 public keys of earlier signing keys, still published in the JWKS until their tokens expire"`
	BcryptCost  int           `env:"IDENTITY_BCRYPT_COST" default:"10" usage:"bcrypt cost of the password hashes (4 to 31)"`
	LoginLimit  int           `env:"IDENTITY_LOGIN_LIMIT" default:"10" usage:"login attempts allowed per username in IDENTITY_LOGIN_WINDOW, right or wrong"`
	LoginWindow time.Duration `env:"IDENTITY_LOGIN_WINDOW" default:"1m" usage:"the sliding window of IDENTITY_LOGIN_LIMIT"`
}

// Validate reports every unusable setting, the shared ones included, each
// naming its variable. The development signing key is refused outside dev
// and lab, as the development tokens are.
func (c Config) Validate() error {
	errs := []error{
		c.Config.Validate(),
		auth.CheckURL("IDENTITY_ISSUER", c.Issuer),
		checkAudiences(c.Audiences),
		pkgconfig.CheckPositive("IDENTITY_TOKEN_TTL", c.TokenTTL),
		c.Env.CheckSecret("IDENTITY_SIGNING_KEY", c.SigningKey, DevSigningKey),
		pkgconfig.CheckRange("IDENTITY_BCRYPT_COST", c.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost),
		pkgconfig.CheckPositive("IDENTITY_LOGIN_LIMIT", c.LoginLimit),
		checkAtLeast("IDENTITY_LOGIN_WINDOW", c.LoginWindow, time.Millisecond),
	}
	if _, err := c.Key(); err != nil {
		errs = append(errs, &pkgconfig.Error{Var: "IDENTITY_SIGNING_KEY", Value: "<redacted>", Err: err})
	}
	if _, err := c.Retired(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SeedDevUsers reports whether the development users are created: in dev
// and lab only, as their passwords are published.
func (c Config) SeedDevUsers() bool { return c.Env == platform.EnvDev || c.Env == platform.EnvLab }

// Key is the signing key IDENTITY_SIGNING_KEY holds.
func (c Config) Key() (ed25519.PrivateKey, error) { return auth.ParsePrivateKey(c.SigningKey) }

// Retired are the public keys IDENTITY_RETIRED_KEYS holds.
func (c Config) Retired() ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, s := range c.RetiredKeys {
		if strings.TrimSpace(s) == "" {
			continue
		}
		k, err := auth.ParsePublicKey(s)
		if err != nil {
			return nil, &pkgconfig.Error{Var: "IDENTITY_RETIRED_KEYS", Value: s, Err: err}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// App returns the use cases' configuration.
func (c Config) App() app.Config {
	return app.Config{Issuer: c.Issuer, Audiences: c.Audiences, TokenTTL: c.TokenTTL}
}

// LoginLimits is the login rate limiter's configuration, its keys under
// the deployment's event prefix so two deployments sharing a Redis do not
// count each other's attempts.
func (c Config) LoginLimits() ratelimit.Config {
	return ratelimit.Config{Prefix: "oncemall:" + c.Events.SubjectPrefix + "identity:login:", Limit: c.LoginLimit, Window: c.LoginWindow}
}

func checkAudiences(auds []string) error {
	if len(auds) == 0 {
		return &pkgconfig.Error{Var: "IDENTITY_AUDIENCES", Value: "", Err: errors.New("at least one audience is required")}
	}
	return nil
}

func checkAtLeast(name string, v, min time.Duration) error {
	if v < min {
		return &pkgconfig.Error{Var: name, Value: v.String(), Err: errors.New("must be at least " + min.String())}
	}
	return nil
}
