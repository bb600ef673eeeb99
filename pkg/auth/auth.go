// Package auth is how oncemall knows who a request comes from: the access
// tokens the identity service (services/identity) signs, and the Verifier
// and gin middleware the other services check them with.
//
// A token is a JWT signed with Ed25519 (alg EdDSA, typ at+jwt) by a key the
// issuer publishes in its JWKS. The Verifier fetches that JWKS, and accepts a
// token only when its signature, issuer (iss), audience (aud) and expiry
// (exp) check out and its subject (sub) is a user id. Everything else, a
// missing token or a bare X-User-ID header included, is 401 problem+json.
package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
)

// The token's shape, shared by the Signer and the Verifier.
const (
	// Algorithm is the one signature algorithm issued and accepted.
	Algorithm = "EdDSA"
	// TokenType is the typ header of an access token (RFC 9068), which the
	// Verifier requires, so that no other JWT signed by the same keys
	// passes for one.
	TokenType = "at+jwt"
)

// The roles a token may carry.
const (
	RoleCustomer = "customer"
	RoleOperator = "operator"
)

// Config is what a service needs to check tokens: whose they must be (the
// issuer), for whom (the audience), and where the issuer's keys are.
type Config struct {
	Issuer   string `env:"AUTH_ISSUER" default:"http://127.0.0.1:8084" usage:"the identity service's issuer URL: a token's iss must equal it"`
	Audience string `env:"AUTH_AUDIENCE" default:"oncemall" usage:"the audience a token must name in aud to be accepted by this service"`
	JWKSURL  string `env:"AUTH_JWKS_URL" default:"" usage:"where the issuer's signing keys are fetched (empty: AUTH_ISSUER + /.well-known/jwks.json)"`
}

// Validate reports every unusable setting, naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		CheckURL("AUTH_ISSUER", c.Issuer),
		pkgconfig.CheckNotEmpty("AUTH_AUDIENCE", c.Audience),
		checkOptionalURL("AUTH_JWKS_URL", c.JWKSURL),
	)
}

// KeysURL is where the issuer's JWKS is: JWKSURL, or the issuer's
// well-known path.
func (c Config) KeysURL() string {
	if c.JWKSURL != "" {
		return c.JWKSURL
	}
	return strings.TrimSuffix(c.Issuer, "/") + JWKSPath
}

// The issuer's well-known paths.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// CheckURL refuses a v of variable name that is not an http:// or https://
// URL.
func CheckURL(name, v string) error {
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return &pkgconfig.Error{Var: name, Value: v, Err: errors.New("must be an http:// or https:// URL")}
	}
	return nil
}

func checkOptionalURL(name, v string) error {
	if v == "" {
		return nil
	}
	return CheckURL(name, v)
}

// Principal is the verified caller: who the token says, once the Verifier
// has checked it.
type Principal struct {
	// UserID is the token's subject, a positive integer: the id every
	// service keys a user's orders, coupons and payments by.
	UserID uint64
	Roles  []string
	// Expiry is when the token stops being accepted.
	Expiry time.Time
}

// HasRole reports whether the token carries role.
func (p Principal) HasRole(role string) bool { return slices.Contains(p.Roles, role) }

type principalKey struct{}

// WithPrincipal returns ctx carrying p, as the middleware stores it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the middleware verified for the
// request whose context ctx is.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
