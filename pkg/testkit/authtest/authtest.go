// Package authtest is an identity service in process for tests: a key of
// the test's own, its discovery document and JWKS served over HTTP, and
// tokens minted on demand, good ones and every kind a verifier must refuse.
//
//	iss := authtest.New(t)
//	v, _ := auth.NewVerifier(iss.Config(), auth.Options{})
//	req.Header.Set("Authorization", "Bearer "+iss.Token(t, 7, auth.RoleCustomer))
package authtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/oncemall/oncemall/pkg/auth"
)

// Audience is the audience the issuer's tokens name unless told otherwise.
const Audience = "oncemall"

// Issuer serves a discovery document and a JWKS at URL until the test ends,
// and mints tokens signed by its current key.
type Issuer struct {
	// URL is the issuer: what its tokens carry in iss.
	URL string

	fetches atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	key     ed25519.PrivateKey
	signer  *auth.Signer
}

// New starts an issuer with a fresh Ed25519 key.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+auth.JWKSPath, func(w http.ResponseWriter, _ *http.Request) {
		i.fetches.Add(1)
		if i.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		i.mu.Lock()
		set := i.signer.JWKS()
		i.mu.Unlock()
		writeJSON(w, set)
	})
	mux.HandleFunc("GET "+auth.DiscoveryPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, auth.NewDiscovery(i.URL))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	i.URL = srv.URL
	i.Rotate(t, false)
	return i
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Config is the verifier configuration of a service that trusts this
// issuer, with Audience.
func (i *Issuer) Config() auth.Config { return auth.Config{Issuer: i.URL, Audience: Audience} }

// Rotate replaces the signing key with a new one. With keepOld the old key
// stays in the JWKS (a rotation: its tokens remain good until they expire);
// without, it is gone (a key withdrawn).
func (i *Issuer) Rotate(t testing.TB, keepOld bool) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var retired []ed25519.PublicKey
	if keepOld && i.key != nil {
		retired = append(retired, i.key.Public().(ed25519.PublicKey))
	}
	s, err := auth.NewSigner(key, retired...)
	if err != nil {
		t.Fatal(err)
	}
	i.key, i.signer = key, s
}

// KeyID is the kid of the current signing key.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.signer.KeyID()
}

// SetDown makes the JWKS answer 503 (down) or serve again: an issuer out
// of reach.
func (i *Issuer) SetDown(down bool) { i.down.Store(down) }

// Fetches counts the JWKS requests served so far.
func (i *Issuer) Fetches() int { return int(i.fetches.Load()) }

// Claims are the claims of a good token for userID: this issuer, Audience,
// issued now, expiring in an hour. Change a field and Mint it for a token
// that is wrong in that one way.
func (i *Issuer) Claims(userID uint64, roles ...string) auth.Claims {
	now := time.Now()
	return auth.Claims{Issuer: i.URL, Subject: strconv.FormatUint(userID, 10), Audience: []string{Audience},
		Roles: roles, IssuedAt: now, Expiry: now.Add(time.Hour)}
}

// Mint signs c with the current key.
func (i *Issuer) Mint(t testing.TB, c auth.Claims) string {
	t.Helper()
	i.mu.Lock()
	s := i.signer
	i.mu.Unlock()
	tok, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Token is a good token for userID with roles.
func (i *Issuer) Token(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	return i.Mint(t, i.Claims(userID, roles...))
}

// Expired is userID's token that expired a minute ago.
func (i *Issuer) Expired(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	c := i.Claims(userID, roles...)
	c.IssuedAt, c.Expiry = time.Now().Add(-time.Hour), time.Now().Add(-time.Minute)
	return i.Mint(t, c)
}

// ForAudience is userID's token for another audience.
func (i *Issuer) ForAudience(t testing.TB, audience string, userID uint64, roles ...string) string {
	t.Helper()
	c := i.Claims(userID, roles...)
	c.Audience = []string{audience}
	return i.Mint(t, c)
}

// Forged is userID's token signed by a key the issuer never published,
// under the current key's kid: what someone without the key can make.
func (i *Issuer) Forged(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	_, stranger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, jose.SigningKey{Algorithm: auth.Algorithm, Key: jose.JSONWebKey{Key: stranger, KeyID: i.KeyID()}}, i.Claims(userID, roles...))
}

// Tampered is a good token for one user whose payload was then rewritten
// to name userID, its signature kept.
func (i *Issuer) Tampered(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	good := strings.Split(i.Token(t, userID+1, roles...), ".")
	payload := claimsJSON(t, i.Claims(userID, roles...))
	return good[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + good[2]
}

// Unsigned is userID's token with alg "none" and no signature.
func (i *Issuer) Unsigned(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": auth.TokenType, "kid": i.KeyID()})
	return base64.RawURLEncoding.EncodeToString(header) + "." +
		base64.RawURLEncoding.EncodeToString(claimsJSON(t, i.Claims(userID, roles...))) + "."
}

// HMACWithPublicKey is userID's token signed HS256 with the published JWK
// of the current key as the HMAC secret: the algorithm confusion that fools
// a verifier which lets the token choose how its key is used.
func (i *Issuer) HMACWithPublicKey(t testing.TB, userID uint64, roles ...string) string {
	t.Helper()
	i.mu.Lock()
	published, err := json.Marshal(i.signer.JWKS().Keys[0])
	i.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: published, KeyID: i.KeyID()}}, i.Claims(userID, roles...))
}

// sign signs c with key as an access token, bypassing auth.Signer.
func sign(t testing.TB, key jose.SigningKey, c auth.Claims) string {
	t.Helper()
	s, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType(auth.TokenType))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(stdClaims(c)).Claims(map[string]any{"roles": c.Roles}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claimsJSON(t testing.TB, c auth.Claims) []byte {
	t.Helper()
	m := map[string]any{}
	b, err := json.Marshal(stdClaims(c))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	m["roles"] = c.Roles
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stdClaims(c auth.Claims) jwt.Claims {
	return jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience(c.Audience),
		IssuedAt: jwt.NewNumericDate(c.IssuedAt), Expiry: jwt.NewNumericDate(c.Expiry)}
}
