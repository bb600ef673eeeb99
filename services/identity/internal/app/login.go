package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/services/identity/internal/user"
)

// Credentials are a password grant's request.
type Credentials struct {
	Username string
	Password string
	// Audience is the audience asked for; empty is the default one.
	Audience string
}

// Token is an issued access token.
type Token struct {
	AccessToken string
	ExpiresIn   int64 // seconds
}

// Login checks c and signs a token for its user, with the user's roles,
// for the audience asked. An unknown user and a wrong password are both
// ErrInvalidCredentials and take the same time (a dummy hash is checked
// for an unknown user). Each username gets at most the limiter's logins in
// its window, right or wrong, known or not: ErrTooManyAttempts. When the
// limiter cannot be asked, the login goes on (logged): bcrypt's cost still
// bounds the guessing.
func (a *App) Login(ctx context.Context, c Credentials) (Token, error) {
	name := user.NormalizeUsername(c.Username)
	if name == "" || c.Password == "" {
		return Token{}, fmt.Errorf("%w: username and password are required", ErrInvalidRequest)
	}
	aud, err := a.audience(c.Audience)
	if err != nil {
		return Token{}, fmt.Errorf("%w %q", err, c.Audience)
	}
	allowed, err := a.limiter.Allow(ctx, name)
	if err != nil {
		a.log.WarnContext(ctx, "login rate limit not checked", "err", err)
	} else if !allowed {
		return Token{}, ErrTooManyAttempts
	}
	u, err := a.users.ByUsername(ctx, name)
	found := err == nil
	if err != nil && !errors.Is(err, user.ErrNotFound) {
		return Token{}, fmt.Errorf("login: %w", err)
	}
	if !a.passwords.Matches(u, found, c.Password) {
		return Token{}, ErrInvalidCredentials
	}
	now := a.cfg.Now()
	tok, err := a.signer.Sign(auth.Claims{
		Issuer: a.cfg.Issuer, Subject: strconv.FormatUint(u.ID, 10), Audience: []string{aud},
		Roles: u.Roles, IssuedAt: now, Expiry: now.Add(a.cfg.TokenTTL),
	})
	if err != nil {
		return Token{}, fmt.Errorf("login: %w", err)
	}
	return Token{AccessToken: tok, ExpiresIn: int64(a.cfg.TokenTTL.Seconds())}, nil
}
