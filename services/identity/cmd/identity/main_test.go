package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/identity/internal/config"
)

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "identity",
		Dir:      "services/identity/cmd/identity",
		Vars:     service.Vars(),
		AddrVars: []string{"HTTP_ADDR"},
	})
}

// TestLoadDefaultsAndBadValues: with nothing set the issuer listens on
// :8084 as http://127.0.0.1:8084 for the audience oncemall; every unusable
// value is refused naming its variable.
func TestLoadDefaultsAndBadValues(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "lab")
	cfg, err := service.Load(os.LookupEnv)
	testenv.Must(t, err)
	if cfg.HTTPAddr != ":8084" || cfg.Database != "oncemall_identity" || cfg.Issuer != "http://127.0.0.1:8084" ||
		!slices.Equal(cfg.Audiences, []string{"oncemall"}) || cfg.TokenTTL != 15*time.Minute || cfg.SigningKey != config.DevSigningKey || !cfg.SeedDevUsers() {
		t.Fatalf("defaults: %+v", cfg)
	}
	configtest.BadValuesNamed(t, func() error { _, err := service.Load(os.LookupEnv); return err }, configtest.With(map[string]string{
		"IDENTITY_ISSUER":       "127.0.0.1:8084",
		"IDENTITY_AUDIENCES":    " , ",
		"IDENTITY_TOKEN_TTL":    "0s",
		"IDENTITY_SIGNING_KEY":  "c2hvcnQ=",
		"IDENTITY_RETIRED_KEYS": "not-a-key",
		"IDENTITY_BCRYPT_COST":  "3",
		"IDENTITY_LOGIN_LIMIT":  "0",
		"IDENTITY_LOGIN_WINDOW": "0s",
	}))
}

// TestProductionRefusesTheDevelopmentKey: outside dev and lab the
// published signing key is refused by name, as the development tokens are,
// and no development user is seeded; a key of one's own is accepted.
func TestProductionRefusesTheDevelopmentKey(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "production")
	t.Setenv("ADMIN_TOKEN", "an-admin-token-of-our-own")
	t.Setenv("INTERNAL_TOKEN", "an-internal-token-of-our-own")
	_, err := service.Load(os.LookupEnv)
	if err == nil || !strings.Contains(err.Error(), "IDENTITY_SIGNING_KEY") || !strings.Contains(err.Error(), "published development value") {
		t.Fatalf("production with the development key: %v, want IDENTITY_SIGNING_KEY refused", err)
	}
	t.Setenv("IDENTITY_SIGNING_KEY", newSeed(t))
	cfg, err := service.Load(os.LookupEnv)
	testenv.Must(t, err)
	if cfg.SeedDevUsers() {
		t.Fatal("production would seed the development users")
	}
}

func newSeed(t *testing.T) string {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	_, err := rand.Read(seed)
	testenv.Must(t, err)
	return base64.StdEncoding.EncodeToString(seed)
}

// issuer is an identity service running in process on a database of its
// own.
type issuer struct {
	base string // its URL, which is also IDENTITY_ISSUER
	db   *gorm.DB
	cfg  config.Config
}

// start runs the service as main assembles it, with vars on top of the
// test's environment; IDENTITY_ISSUER is its own address. bcrypt's lowest
// cost keeps the tests quick; the cost is a setting, not a code path.
func start(t *testing.T, vars map[string]string) issuer {
	t.Helper()
	addr := testenv.FreeAddr(t)
	set := map[string]string{"HTTP_ADDR": addr, "IDENTITY_ISSUER": "http://" + addr, "IDENTITY_BCRYPT_COST": "4"}
	for k, v := range vars {
		set[k] = v
	}
	cfg := svctest.Config(t, service, set)
	_, base := svctest.Start(t, service, cfg, func(w *platform.Wiring, cfg config.Config) (struct{}, error) {
		return struct{}{}, wire(w, cfg)
	})
	db, err := database.Open(context.Background(), cfg.MySQL, cfg.Database, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return issuer{base: base, db: db, cfg: cfg}
}

// login posts the password grant as a form and decodes the JSON answer.
func (s issuer) login(t *testing.T, form url.Values) (*http.Response, map[string]any) {
	t.Helper()
	return s.post(t, "application/x-www-form-urlencoded", form.Encode())
}

func (s issuer) post(t *testing.T, contentType, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(s.base+auth.TokenPath, contentType, strings.NewReader(body))
	testenv.Must(t, err)
	return resp, decode(t, resp)
}

func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %q is not JSON", resp.Request.URL, resp.StatusCode, b)
	}
	return out
}

func grant(user, password string, extra ...string) url.Values {
	f := url.Values{"grant_type": {"password"}, "username": {user}, "password": {password}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Set(extra[i], extra[i+1])
	}
	return f
}

func count(t *testing.T, db *gorm.DB, query string) int {
	t.Helper()
	var n int
	testenv.Must(t, db.Raw(query).Scan(&n).Error)
	return n
}

// TestTokensAreAcceptedByPkgAuth: a development user's token, fetched over
// HTTP from POST /token, is accepted by pkg/auth's verifier with the keys
// it fetches from the running issuer: the user's id and roles, for the
// audience asked, expiring after IDENTITY_TOKEN_TTL; a token for another
// audience is refused by a verifier of the default one.
func TestTokensAreAcceptedByPkgAuth(t *testing.T) {
	s := start(t, map[string]string{"IDENTITY_AUDIENCES": "oncemall,payment-admin", "IDENTITY_TOKEN_TTL": "10m"})
	verifier := func(aud string) *auth.Verifier {
		v, err := auth.NewVerifier(auth.Config{Issuer: s.base, Audience: aud}, auth.Options{})
		testenv.Must(t, err)
		return v
	}
	shop, admin := verifier("oncemall"), verifier("payment-admin")
	ctx := context.Background()

	for _, c := range []struct {
		user, password string
		id             uint64
		roles          []string
	}{
		{"alice", "alice-dev-password", 42, []string{auth.RoleCustomer}},
		{"Bob", "bob-dev-password", 43, []string{auth.RoleCustomer}},
		{"operator", "operator-dev-password", 1, []string{auth.RoleOperator}},
	} {
		resp, body := s.login(t, grant(c.user, c.password))
		if resp.StatusCode != http.StatusOK || body["token_type"] != "Bearer" || body["expires_in"] != float64(600) ||
			resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("POST /token as %s: %d %v", c.user, resp.StatusCode, body)
		}
		p, err := shop.Verify(ctx, body["access_token"].(string))
		if err != nil || p.UserID != c.id || !slices.Equal(p.Roles, c.roles) {
			t.Fatalf("%s's token: %+v, %v; want user %d with %v", c.user, p, err, c.id, c.roles)
		}
		if left := time.Until(p.Expiry); left <= 9*time.Minute || left > 10*time.Minute {
			t.Fatalf("%s's token expires in %v, want IDENTITY_TOKEN_TTL (10m)", c.user, left)
		}
	}

	resp, body := s.login(t, grant("operator", "operator-dev-password", "audience", "payment-admin"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /token for payment-admin: %d %v", resp.StatusCode, body)
	}
	tok := body["access_token"].(string)
	if p, err := admin.Verify(ctx, tok); err != nil || p.UserID != 1 {
		t.Fatalf("a payment-admin token at a payment-admin verifier: %+v, %v", p, err)
	}
	if _, err := shop.Verify(ctx, tok); err == nil {
		t.Fatal("a payment-admin token was accepted for the audience oncemall")
	}
}

// TestWrongPasswordAndUnknownUserAnswerAlike: both are 401 problem+json with
// the same body, so the answer does not tell which names exist, and
// neither writes anything.
func TestWrongPasswordAndUnknownUserAnswerAlike(t *testing.T) {
	s := start(t, nil)
	before := count(t, s.db, "SELECT COUNT(*) FROM users")
	var bodies []map[string]any
	for _, f := range []url.Values{grant("alice", "not-her-password"), grant("mallory", "alice-dev-password")} {
		resp, body := s.login(t, f)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != problem.ContentType ||
			body["error"] != "invalid_grant" || body["access_token"] != nil {
			t.Fatalf("POST /token as %s: %d %s %v, want 401 problem+json", f.Get("username"), resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		bodies = append(bodies, body)
	}
	a, _ := json.Marshal(bodies[0])
	b, _ := json.Marshal(bodies[1])
	if string(a) != string(b) {
		t.Fatalf("a wrong password and an unknown user answer differently:\n%s\n%s", a, b)
	}
	if after := count(t, s.db, "SELECT COUNT(*) FROM users"); after != before || before != 3 {
		t.Fatalf("users: %d before, %d after; want the 3 development users, unchanged", before, after)
	}
}

// TestTokenRequestRefusals: a body that is not a form is 415; another grant
// type, a missing password and an audience the issuer does not serve are
// 400; each problem+json with its OAuth error code.
func TestTokenRequestRefusals(t *testing.T) {
	s := start(t, nil)
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"JSON", "application/json", `{"grant_type":"password","username":"alice","password":"alice-dev-password"}`, http.StatusUnsupportedMediaType, "invalid_request"},
		{"text/plain form", "text/plain", grant("alice", "alice-dev-password").Encode(), http.StatusUnsupportedMediaType, "invalid_request"},
		{"client credentials", "application/x-www-form-urlencoded", "grant_type=client_credentials", http.StatusBadRequest, "unsupported_grant_type"},
		{"no password", "application/x-www-form-urlencoded", "grant_type=password&username=alice", http.StatusBadRequest, "invalid_request"},
		{"unknown audience", "application/x-www-form-urlencoded", grant("alice", "alice-dev-password", "audience", "elsewhere").Encode(), http.StatusBadRequest, "invalid_target"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := s.post(t, c.contentType, c.body)
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != problem.ContentType || body["error"] != c.code || body["access_token"] != nil {
				t.Fatalf("%d %s %v, want %d problem+json with error %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.code)
			}
		})
	}
}

// TestLoginRateLimit: past IDENTITY_LOGIN_LIMIT attempts in the window a
// username is refused 429 with Retry-After, even with its right password,
// and so is a name no one has; other usernames still sign in.
func TestLoginRateLimit(t *testing.T) {
	s := start(t, map[string]string{"IDENTITY_LOGIN_LIMIT": "3", "IDENTITY_LOGIN_WINDOW": "1m"})
	for _, name := range []string{"alice", "nobody"} {
		for i := range 3 {
			if resp, body := s.login(t, grant(name, "guess")); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s attempt %d: %d %v, want 401", name, i+1, resp.StatusCode, body)
			}
		}
	}
	for _, f := range []url.Values{grant("alice", "alice-dev-password"), grant("nobody", "guess")} {
		resp, body := s.login(t, f)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" ||
			resp.Header.Get("Content-Type") != problem.ContentType || body["access_token"] != nil {
			t.Fatalf("%s's 4th attempt: %d %v (Retry-After %q), want 429", f.Get("username"), resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	if resp, body := s.login(t, grant("bob", "bob-dev-password")); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob, under his own limit: %d %v", resp.StatusCode, body)
	}
}

// TestDiscoveryAndJWKS: the discovery document names this issuer, its
// token endpoint and its JWKS, which publishes the signing key (the kid a
// token names) and the retired keys of IDENTITY_RETIRED_KEYS.
func TestDiscoveryAndJWKS(t *testing.T) {
	retired, _, err := ed25519.GenerateKey(rand.Reader)
	testenv.Must(t, err)
	s := start(t, map[string]string{"IDENTITY_RETIRED_KEYS": base64.StdEncoding.EncodeToString(retired)})
	resp, err := http.Get(s.base + auth.DiscoveryPath)
	testenv.Must(t, err)
	doc := decode(t, resp)
	if doc["issuer"] != s.base || doc["token_endpoint"] != s.base+"/token" || doc["jwks_uri"] != s.base+auth.JWKSPath {
		t.Fatalf("discovery: %v", doc)
	}
	resp, err = http.Get(doc["jwks_uri"].(string))
	testenv.Must(t, err)
	var set struct {
		Keys []struct {
			Kty, Crv, Alg, Use, Kid, X string
			D                          string `json:"d"`
		} `json:"keys"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	testenv.Must(t, json.Unmarshal(b, &set))
	if len(set.Keys) != 2 {
		t.Fatalf("JWKS %s: want the signing key and the retired one", b)
	}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || k.Use != "sig" || k.Kid == "" || k.D != "" {
			t.Fatalf("JWKS key %+v: want a public Ed25519 signing key", k)
		}
	}
	if set.Keys[1].X != base64.RawURLEncoding.EncodeToString(retired) {
		t.Fatalf("the retired key is not published: %s", b)
	}
	_, body := s.login(t, grant("alice", "alice-dev-password"))
	header, _, _ := strings.Cut(body["access_token"].(string), ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	testenv.Must(t, err)
	var h map[string]string
	testenv.Must(t, json.Unmarshal(raw, &h))
	if h["alg"] != "EdDSA" || h["typ"] != "at+jwt" || h["kid"] != set.Keys[0].Kid {
		t.Fatalf("token header %v, want EdDSA at+jwt signed by kid %s", h, set.Keys[0].Kid)
	}
}

// TestProductionSeedsNoOne: in production the development users do not
// exist, and their published passwords sign no one in.
func TestProductionSeedsNoOne(t *testing.T) {
	s := start(t, map[string]string{"ONCEMALL_ENV": "production", "ADMIN_TOKEN": "an-admin-token-of-our-own",
		"INTERNAL_TOKEN": "an-internal-token-of-our-own", "IDENTITY_SIGNING_KEY": newSeed(t)})
	if n := count(t, s.db, "SELECT COUNT(*) FROM users"); n != 0 {
		t.Fatalf("%d users in production, want none", n)
	}
	if resp, body := s.login(t, grant("alice", "alice-dev-password")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("alice in production: %d %v, want 401", resp.StatusCode, body)
	}
}
