package auth

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Claims are what an access token says.
type Claims struct {
	Issuer   string
	Subject  string // the user id, in decimal
	Audience []string
	Roles    []string
	IssuedAt time.Time
	Expiry   time.Time
}

// Signer signs access tokens with one Ed25519 key and publishes, in its
// JWKS, that key's public half and those of the keys it replaced, so that
// tokens they signed are accepted until they expire.
type Signer struct {
	signer jose.Signer
	kid    string
	keys   jose.JSONWebKeySet
}

// NewSigner returns a signer with key; retired are the public keys of
// earlier signing keys, still published.
func NewSigner(key ed25519.PrivateKey, retired ...ed25519.PublicKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("auth: not an Ed25519 private key")
	}
	current, err := publicJWK(key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	s := &Signer{kid: current.KeyID, keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{current}}}
	for _, pub := range retired {
		k, err := publicJWK(pub)
		if err != nil {
			return nil, err
		}
		if k.KeyID != current.KeyID {
			s.keys.Keys = append(s.keys.Keys, k)
		}
	}
	s.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: Algorithm, Key: jose.JSONWebKey{Key: key, KeyID: s.kid}},
		(&jose.SignerOptions{}).WithType(TokenType))
	if err != nil {
		return nil, fmt.Errorf("auth: signer: %w", err)
	}
	return s, nil
}

// publicJWK is pub as a JWKS entry, its kid the key's RFC 7638 thumbprint:
// a new key gets a new kid without anyone choosing one.
func publicJWK(pub ed25519.PublicKey) (jose.JSONWebKey, error) {
	if len(pub) != ed25519.PublicKeySize {
		return jose.JSONWebKey{}, errors.New("auth: not an Ed25519 public key")
	}
	k := jose.JSONWebKey{Key: pub, Algorithm: Algorithm, Use: "sig"}
	thumb, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return jose.JSONWebKey{}, fmt.Errorf("auth: thumbprint: %w", err)
	}
	k.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	return k, nil
}

// KeyID is the kid of the key that signs.
func (s *Signer) KeyID() string { return s.kid }

// JWKS is the key set the issuer publishes: the signing key's public half
// first, then the retired ones.
func (s *Signer) JWKS() jose.JSONWebKeySet { return s.keys }

// Sign returns c as a compact JWT.
func (s *Signer) Sign(c Claims) (string, error) {
	std := jwt.Claims{
		Issuer:   c.Issuer,
		Subject:  c.Subject,
		Audience: jwt.Audience(c.Audience),
		IssuedAt: jwt.NewNumericDate(c.IssuedAt),
		Expiry:   jwt.NewNumericDate(c.Expiry),
	}
	tok, err := jwt.Signed(s.signer).Claims(std).Claims(map[string]any{"roles": c.Roles}).Serialize()
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	return tok, nil
}

// ParsePrivateKey reads an Ed25519 private key written as the standard
// base64 of its 32-byte seed (what `openssl rand -base64 32` prints).
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("not the base64 of a 32-byte Ed25519 seed")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads an Ed25519 public key written as the standard base64
// of its 32 bytes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not the base64 of a 32-byte Ed25519 public key")
	}
	return ed25519.PublicKey(b), nil
}

// Discovery is the issuer's metadata document, served at DiscoveryPath
// (OpenID Connect Discovery, RFC 8414): where its token endpoint and its
// keys are, and what it issues.
type Discovery struct {
	Issuer            string   `json:"issuer"`
	TokenEndpoint     string   `json:"token_endpoint"`
	JWKSURI           string   `json:"jwks_uri"`
	GrantTypes        []string `json:"grant_types_supported"`
	ResponseTypes     []string `json:"response_types_supported"`
	SubjectTypes      []string `json:"subject_types_supported"`
	SigningAlgs       []string `json:"id_token_signing_alg_values_supported"`
	TokenAuthMethods  []string `json:"token_endpoint_auth_methods_supported"`
	ClaimsSupported   []string `json:"claims_supported"`
	AccessTokenFormat string   `json:"access_token_format"`
}

// NewDiscovery is the document of the issuer at issuer, whose token
// endpoint is TokenPath.
func NewDiscovery(issuer string) Discovery {
	base := strings.TrimSuffix(issuer, "/")
	return Discovery{
		Issuer: issuer, TokenEndpoint: base + TokenPath, JWKSURI: base + JWKSPath,
		GrantTypes: []string{"password"}, ResponseTypes: []string{"token"}, SubjectTypes: []string{"public"},
		SigningAlgs: []string{Algorithm}, TokenAuthMethods: []string{"none"},
		ClaimsSupported: []string{"iss", "sub", "aud", "exp", "iat", "roles"}, AccessTokenFormat: TokenType,
	}
}

// TokenPath is the issuer's token endpoint.
const TokenPath = "/token"
