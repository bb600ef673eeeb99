package auth

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// ErrKeysUnavailable is a token that could not be checked because the
// issuer's keys could not be fetched: not the caller's fault, answered 503.
var ErrKeysUnavailable = errors.New("auth: the issuer's keys cannot be fetched")

// keySet is the issuer's JWKS as a verifier sees it: fetched on first use,
// fetched again when it is older than maxAge (so a key the issuer retired
// stops being accepted) and when a token names a key it does not hold (so
// a key the issuer just added is accepted), but never more often than once
// per minRefetch, so forged tokens naming made-up keys cannot turn each
// request into a call to the issuer. When a fetch fails the keys already
// held stay in use.
type keySet struct {
	url        string
	client     *http.Client
	now        func() time.Time
	maxAge     time.Duration
	minRefetch time.Duration
	refuse     ed25519.PublicKey // a key never used, whoever publishes it (nil: none)

	fetchMu sync.Mutex // held by the one caller fetching

	mu        sync.RWMutex
	keys      []jose.JSONWebKey
	refused   []string  // the kids of published keys equal to refuse
	fetched   time.Time // the last successful fetch
	attempted time.Time // the last fetch, successful or not
	failure   error     // why the last fetch failed, nil if it did not
}

// VerifySignature checks the compact JWS raw against the issuer's keys and
// returns its payload (oidc.KeySet). The token must be an access token
// (typ at+jwt) signed with Algorithm by a key the JWKS holds under the kid
// it names; a key published for another algorithm or for encryption does
// not count.
func (s *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := s.verify(ctx, raw)
	if slot, ok := ctx.Value(keysErrKey{}).(*error); ok {
		*slot = err
	}
	return payload, err
}

func (s *keySet) verify(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{Algorithm})
	if err != nil {
		return nil, fmt.Errorf("auth: malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("auth: a token has exactly one signature")
	}
	h := jws.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != TokenType {
		return nil, fmt.Errorf("auth: token type %q, want %q", typ, TokenType)
	}
	if h.KeyID == "" {
		return nil, errors.New("auth: the token names no key (kid)")
	}
	key, err := s.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, fmt.Errorf("auth: bad signature: %w", err)
	}
	return payload, nil
}

// key returns the signing key named kid, fetching the JWKS when it is due.
func (s *keySet) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	s.mu.RLock()
	keys, fetched, attempted, refused := s.keys, s.fetched, s.attempted, s.refused
	s.mu.RUnlock()
	if slices.Contains(refused, kid) {
		return nil, errDevKey(kid)
	}
	now := s.now()
	k, found := find(keys, kid)
	stale := fetched.IsZero() || now.Sub(fetched) >= s.maxAge
	if found && !stale {
		return k, nil
	}
	if !stale && now.Sub(attempted) < s.minRefetch {
		return nil, fmt.Errorf("auth: unknown signing key %q", kid)
	}
	keys, err := s.refresh(ctx, attempted)
	if k, ok := find(keys, kid); ok {
		return k, nil
	}
	s.mu.RLock()
	refused = s.refused
	s.mu.RUnlock()
	if slices.Contains(refused, kid) {
		return nil, errDevKey(kid)
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("auth: unknown signing key %q", kid)
}

// refresh fetches the JWKS unless another caller has attempted it since
// seen, and returns the keys held afterwards: the old ones, with the error,
// when the fetch failed.
func (s *keySet) refresh(ctx context.Context, seen time.Time) ([]jose.JSONWebKey, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	s.mu.RLock()
	keys, attempted, failure := s.keys, s.attempted, s.failure
	s.mu.RUnlock()
	if !attempted.Equal(seen) {
		return keys, failure // fetched by another caller meanwhile
	}
	fresh, refused, err := s.fetch(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempted = s.now()
	if err != nil {
		s.failure = fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		return s.keys, s.failure
	}
	s.keys, s.refused, s.fetched, s.failure = fresh, refused, s.attempted, nil
	return fresh, nil
}

// fetch reads the JWKS, keeping the keys that can verify Algorithm, less
// the refused key, whose kids it returns apart.
func (s *keySet) fetch(ctx context.Context) (keys []jose.JSONWebKey, refused []string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	for _, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() || k.Algorithm != Algorithm || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if pub, ok := k.Key.(ed25519.PublicKey); ok && s.refuse != nil && pub.Equal(s.refuse) {
			refused = append(refused, k.KeyID)
			continue
		}
		keys = append(keys, k)
	}
	return keys, refused, nil
}

func errDevKey(kid string) error {
	return fmt.Errorf("auth: signing key %q is the published development key, refused outside dev and lab", kid)
}

func find(keys []jose.JSONWebKey, kid string) (*jose.JSONWebKey, bool) {
	for i := range keys {
		if keys[i].KeyID == kid {
			return &keys[i], true
		}
	}
	return nil, false
}
