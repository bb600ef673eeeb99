package auth_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
)

// clock is a settable time for the verifier's key ages; tokens are minted
// on the real clock, an hour long, so moving it minutes does not expire
// them.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newVerifier(t *testing.T, iss *authtest.Issuer, now func() time.Time) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(iss.Config(), auth.Options{Now: now, KeysMaxAge: 5 * time.Minute, KeysMinRefetch: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVerifyAcceptsAGoodToken: the user id, roles and expiry come from the
// token, whose key was fetched from the issuer's JWKS over HTTP.
func TestVerifyAcceptsAGoodToken(t *testing.T) {
	iss := authtest.New(t)
	v := newVerifier(t, iss, nil)
	c := iss.Claims(42, auth.RoleCustomer, auth.RoleOperator)
	p, err := v.Verify(context.Background(), iss.Mint(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != 42 || !slices.Equal(p.Roles, []string{auth.RoleCustomer, auth.RoleOperator}) || p.Expiry.Unix() != c.Expiry.Unix() {
		t.Fatalf("principal %+v, want user 42, customer and operator, expiry %v", p, c.Expiry)
	}
	if !p.HasRole(auth.RoleOperator) || p.HasRole("root") {
		t.Fatalf("HasRole: %+v", p)
	}
	if iss.Fetches() != 1 {
		t.Fatalf("%d JWKS fetches, want 1", iss.Fetches())
	}
}

// TestVerifyRefuses: every token a caller without the key, or with a token
// meant for something else, can present is ErrInvalidToken.
func TestVerifyRefuses(t *testing.T) {
	iss := authtest.New(t)
	other := authtest.New(t)
	v := newVerifier(t, iss, nil)
	claims := func(change func(*auth.Claims)) string {
		c := iss.Claims(7, auth.RoleCustomer)
		change(&c)
		return iss.Mint(t, c)
	}
	for name, tok := range map[string]string{
		"forged signature":          iss.Forged(t, 7, auth.RoleOperator),
		"tampered payload":          iss.Tampered(t, 7, auth.RoleOperator),
		"expired":                   iss.Expired(t, 7),
		"other audience":            iss.ForAudience(t, "payment-admin", 7),
		"wrong issuer":              claims(func(c *auth.Claims) { c.Issuer = other.URL }),
		"another issuer's key":      other.Mint(t, iss.Claims(7)),
		"alg none":                  iss.Unsigned(t, 7, auth.RoleOperator),
		"HS256 with the public key": iss.HMACWithPublicKey(t, 7, auth.RoleOperator),
		"no expiry":                 claims(func(c *auth.Claims) { c.Expiry = time.Time{} }),
		"subject not a user id":     claims(func(c *auth.Claims) { c.Subject = "alice" }),
		"subject zero":              claims(func(c *auth.Claims) { c.Subject = "0" }),
		"no subject":                claims(func(c *auth.Claims) { c.Subject = "" }),
		"not a JWT":                 "not-a-token",
		"empty":                     "",
	} {
		t.Run(name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), tok)
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Verify: %+v, %v; want ErrInvalidToken", p, err)
			}
			t.Log(err)
		})
	}
}

// TestKeyRotation: after the issuer rotates, a token signed by the new key
// is accepted once the verifier may fetch again, and one signed by the old
// key as long as the JWKS still publishes it; once the issuer withdraws a
// key, its tokens are refused when the verifier's copy of the JWKS ages
// out.
func TestKeyRotation(t *testing.T) {
	iss := authtest.New(t)
	clk := &clock{t: time.Now()}
	v := newVerifier(t, iss, clk.Now)
	ctx := context.Background()
	oldTok := iss.Token(t, 7)
	if _, err := v.Verify(ctx, oldTok); err != nil {
		t.Fatal(err)
	}

	iss.Rotate(t, true)
	newTok := iss.Token(t, 8)
	if _, err := v.Verify(ctx, newTok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("a new key within KeysMinRefetch of the last fetch: %v, want refused until the next fetch", err)
	}
	clk.Add(5 * time.Second)
	if p, err := v.Verify(ctx, newTok); err != nil || p.UserID != 8 {
		t.Fatalf("the new key after the JWKS changed: %+v, %v", p, err)
	}
	if _, err := v.Verify(ctx, oldTok); err != nil {
		t.Fatalf("the retired key, still published: %v", err)
	}

	iss.Rotate(t, false) // the key of newTok and the one before are withdrawn
	if _, err := v.Verify(ctx, newTok); err != nil {
		t.Fatalf("a withdrawn key before the JWKS ages out: %v, want still accepted", err)
	}
	clk.Add(5 * time.Minute)
	if _, err := v.Verify(ctx, newTok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("a withdrawn key after the JWKS aged out: %v, want refused", err)
	}
	if p, err := v.Verify(ctx, iss.Token(t, 9)); err != nil || p.UserID != 9 {
		t.Fatalf("the newest key: %+v, %v", p, err)
	}
}

// TestUnknownKeysDoNotFloodTheIssuer: racing tokens that name a key the
// issuer never published make the verifier fetch the JWKS once, and once
// more only after KeysMinRefetch.
func TestUnknownKeysDoNotFloodTheIssuer(t *testing.T) {
	iss := authtest.New(t)
	stranger := authtest.New(t)
	clk := &clock{t: time.Now()}
	v := newVerifier(t, iss, clk.Now)
	tok := stranger.Mint(t, iss.Claims(7))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), tok); !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("unknown key: %v, want ErrInvalidToken", err)
			}
		})
	}
	wg.Wait()
	if n := iss.Fetches(); n != 1 {
		t.Fatalf("%d JWKS fetches for 32 tokens with an unknown key, want 1", n)
	}
	clk.Add(5 * time.Second)
	_, _ = v.Verify(context.Background(), tok)
	_, _ = v.Verify(context.Background(), tok)
	if n := iss.Fetches(); n != 2 {
		t.Fatalf("%d JWKS fetches after KeysMinRefetch, want 2", n)
	}
}

// TestIssuerOutOfReach: without keys the verifier says so
// (ErrKeysUnavailable, not a refused token); with keys fetched before, it
// goes on with them while the issuer is down.
func TestIssuerOutOfReach(t *testing.T) {
	iss := authtest.New(t)
	clk := &clock{t: time.Now()}
	v := newVerifier(t, iss, clk.Now)
	ctx := context.Background()
	iss.SetDown(true)
	if _, err := v.Verify(ctx, iss.Token(t, 7)); !errors.Is(err, auth.ErrKeysUnavailable) || errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("issuer down, no keys yet: %v, want ErrKeysUnavailable only", err)
	}
	iss.SetDown(false)
	clk.Add(5 * time.Second)
	if _, err := v.Verify(ctx, iss.Token(t, 7)); err != nil {
		t.Fatal(err)
	}
	iss.SetDown(true)
	clk.Add(10 * time.Minute) // the JWKS is due again, and cannot be had
	if p, err := v.Verify(ctx, iss.Token(t, 7)); err != nil || p.UserID != 7 {
		t.Fatalf("issuer down, keys fetched before: %+v, %v; want the held keys used", p, err)
	}
}

// TestConfigValidate names each unusable variable and derives the JWKS URL
// from the issuer.
func TestConfigValidate(t *testing.T) {
	err := auth.Config{Issuer: "127.0.0.1:8084", Audience: "", JWKSURL: "keys"}.Validate()
	for _, name := range []string{"AUTH_ISSUER", "AUTH_AUDIENCE", "AUTH_JWKS_URL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("Validate: %v, want %s named", err, name)
		}
	}
	c := auth.Config{Issuer: "http://identity:8084/", Audience: "oncemall"}
	if c.Validate() != nil || c.KeysURL() != "http://identity:8084/.well-known/jwks.json" {
		t.Fatalf("KeysURL %q, %v", c.KeysURL(), c.Validate())
	}
	c.JWKSURL = "http://other/keys"
	if c.KeysURL() != "http://other/keys" {
		t.Fatalf("KeysURL %q, want AUTH_JWKS_URL", c.KeysURL())
	}
}

// TestConfigLoadsFromTheEnvironment: a service that embeds Config reads
// AUTH_ISSUER, AUTH_AUDIENCE and AUTH_JWKS_URL, with the defaults of make
// run (the issuer on 127.0.0.1:8084, the shop audience).
func TestConfigLoadsFromTheEnvironment(t *testing.T) {
	var cfg struct{ Auth auth.Config }
	if err := config.LoadFrom(&cfg, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if cfg.Auth != (auth.Config{Issuer: "http://127.0.0.1:8084", Audience: "oncemall"}) || cfg.Auth.KeysURL() != "http://127.0.0.1:8084/.well-known/jwks.json" {
		t.Fatalf("defaults: %+v", cfg.Auth)
	}
	env := map[string]string{"AUTH_ISSUER": "https://id.example", "AUTH_AUDIENCE": "payment-admin", "AUTH_JWKS_URL": "http://identity:8084/.well-known/jwks.json"}
	if err := config.LoadFrom(&cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.Auth != (auth.Config{Issuer: "https://id.example", Audience: "payment-admin", JWKSURL: "http://identity:8084/.well-known/jwks.json"}) {
		t.Fatalf("from the environment: %+v", cfg.Auth)
	}
}

// TestDevIssuer: a token the development issuer mints passes a verifier
// of its Config, fetched over HTTP; a token minted with the development
// key for another issuer does not.
func TestDevIssuer(t *testing.T) {
	d, err := auth.StartDevIssuer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	v, err := auth.NewVerifier(d.Config("oncemall"), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.Token("oncemall", 42, auth.RoleCustomer)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), tok)
	if err != nil || p.UserID != 42 || !p.HasRole(auth.RoleCustomer) {
		t.Fatalf("verify: %+v %v", p, err)
	}
	s, err := auth.DevSigner()
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := s.Mint("http://elsewhere.invalid", "oncemall", 42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), elsewhere); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("a token of another issuer: %v, want ErrInvalidToken", err)
	}
}

// TestRefuseDevKey: outside dev and lab the verifier drops the published
// development key from the JWKS, so a development issuer's tokens are
// refused even when the service is pointed at it, while an issuer's own
// key still passes.
func TestRefuseDevKey(t *testing.T) {
	d, err := auth.StartDevIssuer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	v, err := auth.NewVerifier(d.Config("oncemall"), auth.Options{RefuseDevKey: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.Token("oncemall", 42, auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(context.Background(), tok); !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), "development key") {
		t.Fatalf("a development-key token: %+v, %v; want ErrInvalidToken naming the development key", p, err)
	}

	iss := authtest.New(t)
	own, err := auth.NewVerifier(iss.Config(), auth.Options{RefuseDevKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := own.Verify(context.Background(), iss.Token(t, 7)); err != nil || p.UserID != 7 {
		t.Fatalf("an issuer's own key with RefuseDevKey: %+v, %v", p, err)
	}
}
