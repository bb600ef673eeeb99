package auth

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DevSigningKey is the published development signing key: the base64 of
// the 32 bytes "oncemall-dev-signing-key-32bytes". The identity service
// signs with it in dev and lab only (IDENTITY_SIGNING_KEY refuses it
// elsewhere), so the tokens that rigs mint with it (the load generator,
// the lab) are accepted only by services whose issuer is a development one.
const DevSigningKey = "b25jZW1hbGwtZGV2LXNpZ25pbmcta2V5LTMyYnl0ZXM="

// DevSigner is the signer of DevSigningKey.
func DevSigner() (*Signer, error) {
	key, err := ParsePrivateKey(DevSigningKey)
	if err != nil {
		return nil, fmt.Errorf("auth: the development signing key: %w", err)
	}
	return NewSigner(key)
}

// Mint signs a token of issuer for userID with roles, for audience,
// valid for ttl from now.
func (s *Signer) Mint(issuer, audience string, userID uint64, ttl time.Duration, roles ...string) (string, error) {
	now := time.Now()
	return s.Sign(Claims{Issuer: issuer, Subject: strconv.FormatUint(userID, 10), Audience: []string{audience},
		Roles: roles, IssuedAt: now, Expiry: now.Add(ttl)})
}

// IssuerHandler serves what a verifier fetches from issuer, signing with
// s: the discovery document and the JWKS. A rig with no identity service
// (a lab run in one process) serves it and mints with s itself.
func IssuerHandler(issuer string, s *Signer) http.Handler {
	mux := http.NewServeMux()
	serve := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	mux.HandleFunc("GET "+DiscoveryPath, serve(NewDiscovery(issuer)))
	mux.HandleFunc("GET "+JWKSPath, serve(s.JWKS()))
	return mux
}

// DevIssuer is a development issuer in process: IssuerHandler of the
// development key on a loopback port, minting its own tokens. Rigs that run
// services without the identity service (the lab) point AUTH_ISSUER at it.
type DevIssuer struct {
	// URL is the issuer, what its tokens carry in iss.
	URL    string
	signer *Signer
	srv    *http.Server
}

// StartDevIssuer serves a DevIssuer until Close.
func StartDevIssuer() (*DevIssuer, error) {
	s, err := DevSigner()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("auth: development issuer: %w", err)
	}
	d := &DevIssuer{URL: "http://" + ln.Addr().String(), signer: s}
	d.srv = &http.Server{Handler: IssuerHandler(d.URL, s), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// Config is the verifier configuration of a service that trusts d, for
// audience.
func (d *DevIssuer) Config(audience string) Config { return Config{Issuer: d.URL, Audience: audience} }

// Token is a token of d for userID with roles, for audience, valid an hour.
func (d *DevIssuer) Token(audience string, userID uint64, roles ...string) (string, error) {
	return d.signer.Mint(d.URL, audience, userID, time.Hour, roles...)
}

// Close stops serving.
func (d *DevIssuer) Close() error { return d.srv.Close() }
