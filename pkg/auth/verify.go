package auth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Options tune a Verifier beyond its Config. The zero value is usable.
type Options struct {
	// Client fetches the JWKS (nil: a client with a 5s timeout).
	Client *http.Client
	// Now is the clock tokens expire and keys age by (nil: time.Now).
	Now func() time.Time
	// KeysMaxAge is how long a fetched JWKS is used before it is fetched
	// again, so a key the issuer removed stops being accepted (zero: 5m).
	KeysMaxAge time.Duration
	// KeysMinRefetch is the shortest time between two fetches, however many
	// tokens name a key the verifier does not hold (zero: 5s).
	KeysMinRefetch time.Duration
	// RefuseDevKey drops the published development key (DevSigningKey's
	// public half) from the issuer's JWKS, so no token it signed passes,
	// whatever the issuer publishes. Set it outside dev and lab
	// (platform.Env.Development).
	RefuseDevKey bool
}

// Verifier checks access tokens: signature, issuer, audience, expiry, and a
// subject that is a user id.
type Verifier struct {
	oidc *oidc.IDTokenVerifier
}

// NewVerifier returns a verifier of the tokens cfg describes. It fetches
// nothing yet: the JWKS is fetched by the first Verify, so a service starts
// whether or not the identity service is up.
func NewVerifier(cfg Config, opts Options) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeysMaxAge <= 0 {
		opts.KeysMaxAge = 5 * time.Minute
	}
	if opts.KeysMinRefetch <= 0 {
		opts.KeysMinRefetch = 5 * time.Second
	}
	keys := &keySet{url: cfg.KeysURL(), client: opts.Client, now: opts.Now, maxAge: opts.KeysMaxAge, minRefetch: opts.KeysMinRefetch}
	if opts.RefuseDevKey {
		dev, err := ParsePrivateKey(DevSigningKey)
		if err != nil {
			return nil, fmt.Errorf("auth: the development signing key: %w", err)
		}
		keys.refuse = dev.Public().(ed25519.PublicKey)
	}
	// go-oidc checks iss, aud and exp (and nbf when present) on the payload
	// our key set has verified; SupportedSigningAlgs refuses any other
	// algorithm ("none" and HS256 included) before a key is looked at.
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: []string{Algorithm},
		Now:                  opts.Now,
	})
	return &Verifier{oidc: v}, nil
}

// ErrInvalidToken is a token that is refused: malformed, forged, expired,
// for another audience or issuer, or without a user id. The error wrapping
// it says which.
var ErrInvalidToken = errors.New("auth: invalid token")

// Verify checks raw, a compact JWT, and returns who it names. A refused
// token is ErrInvalidToken; a token that cannot be checked because the
// issuer's keys cannot be fetched is ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	// go-oidc flattens the key set's error into text; the key set leaves
	// it here too, so that an issuer out of reach is told from a bad token.
	var keysErr error
	tok, err := v.oidc.Verify(context.WithValue(ctx, keysErrKey{}, &keysErr), raw)
	if err != nil {
		if errors.Is(keysErr, ErrKeysUnavailable) {
			return Principal{}, keysErr
		}
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	id, err := strconv.ParseUint(tok.Subject, 10, 64)
	if err != nil || id == 0 {
		return Principal{}, fmt.Errorf("%w: subject %q is not a user id", ErrInvalidToken, tok.Subject)
	}
	var claims struct {
		Roles []string `json:"roles"`
	}
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, fmt.Errorf("%w: roles: %w", ErrInvalidToken, err)
	}
	return Principal{UserID: id, Roles: claims.Roles, Expiry: tok.Expiry}, nil
}

// keysErrKey carries a *error in which keySet.VerifySignature leaves its
// error.
type keysErrKey struct{}
