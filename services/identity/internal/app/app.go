// Package app holds the identity service's use cases, one file each:
//
//	commands: Login (the password grant: a signed access token),
//	          SeedUsers (the development users, outside production)
//	queries:  JWKS, Discovery
//
// A token is signed by auth.Signer and checked by the other services with
// pkg/auth; its claims are in services/identity/README.md.
package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/services/identity/internal/user"
)

// Errors the use cases answer with; httpapi maps them to statuses.
var (
	// ErrInvalidCredentials is an unknown user or a wrong password: the
	// two are one error, so the answer does not tell which names exist.
	ErrInvalidCredentials = errors.New("invalid username or password")
	// ErrTooManyAttempts is a login over the limit for its username.
	ErrTooManyAttempts = errors.New("too many login attempts for this username; try again later")
	// ErrUnknownAudience is a token asked for an audience this issuer does
	// not serve.
	ErrUnknownAudience = errors.New("unknown audience")
	// ErrInvalidRequest is a request missing its username or password.
	ErrInvalidRequest = errors.New("invalid request")
)

// Limiter admits at most so many calls per key in a window
// (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, error)
}

// Config tunes the use cases.
type Config struct {
	// Issuer is the iss of every token.
	Issuer string
	// Audiences are those a token may be asked for; the first is the one a
	// request that names none gets.
	Audiences []string
	// TokenTTL is how long a token is good for.
	TokenTTL time.Duration
	// Now is the clock tokens are issued by (nil: time.Now).
	Now func() time.Time
}

// App is the identity service's use cases.
type App struct {
	users     user.Store
	passwords *user.Passwords
	signer    *auth.Signer
	limiter   Limiter
	cfg       Config
	log       *slog.Logger
}

// New returns the use cases over users, hashing with passwords, signing
// with signer, and limiting logins per username with limiter.
func New(users user.Store, passwords *user.Passwords, signer *auth.Signer, limiter Limiter, cfg Config, log *slog.Logger) (*App, error) {
	if len(cfg.Audiences) == 0 || cfg.Issuer == "" || cfg.TokenTTL <= 0 {
		return nil, errors.New("identity app: an issuer, an audience and a positive token TTL are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &App{users: users, passwords: passwords, signer: signer, limiter: limiter, cfg: cfg, log: log}, nil
}

// JWKS is the key set the issuer publishes.
func (a *App) JWKS() jose.JSONWebKeySet { return a.signer.JWKS() }

// Discovery is the issuer's metadata document.
func (a *App) Discovery() auth.Discovery { return auth.NewDiscovery(a.cfg.Issuer) }

func (a *App) audience(asked string) (string, error) {
	if asked == "" {
		return a.cfg.Audiences[0], nil
	}
	if !slices.Contains(a.cfg.Audiences, asked) {
		return "", ErrUnknownAudience
	}
	return asked, nil
}
