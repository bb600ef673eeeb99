package auth

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
)

// UserIDHeader is the header the services trusted before tokens. The
// middleware removes it from every request it lets through, so no handler
// can read a user id a client wrote.
const UserIDHeader = "X-User-ID"

// Middleware requires a verified bearer token: the request goes on with its
// Principal in its context (FromContext, User), or is answered 401
// problem+json with a WWW-Authenticate challenge when the token is missing
// (an X-User-ID header alone is missing), malformed, forged, expired, or
// for another issuer or audience; 503 when the issuer's keys cannot be
// fetched, logged on log.
func (v *Verifier) Middleware(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw, ok := bearer(c.GetHeader("Authorization"))
		if !ok {
			refuse(c, "", "a bearer token is required (Authorization: Bearer <access token>)")
			return
		}
		p, err := v.Verify(c.Request.Context(), raw)
		switch {
		case errors.Is(err, ErrKeysUnavailable):
			log.ErrorContext(c.Request.Context(), "token not checked", "err", err)
			c.Header("Retry-After", "1")
			problem.Abort(c, http.StatusServiceUnavailable, "the token cannot be checked now: the identity service's keys are out of reach")
			return
		case err != nil:
			refuse(c, `, error="invalid_token"`, "the token is invalid or expired")
			return
		}
		c.Request.Header.Del(UserIDHeader)
		c.Request = c.Request.WithContext(WithPrincipal(c.Request.Context(), p))
		c.Next()
	}
}

// User returns the principal Middleware verified for c's request.
func User(c *gin.Context) (Principal, bool) { return FromContext(c.Request.Context()) }

// RequireRole lets through only requests whose verified token carries role,
// answering 403 problem+json otherwise. It goes after Middleware; a request
// that did not pass Middleware is 401.
func RequireRole(role string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := User(c)
		if !ok {
			refuse(c, "", "a bearer token is required (Authorization: Bearer <access token>)")
			return
		}
		if !p.HasRole(role) {
			problem.Abort(c, http.StatusForbidden, "the token does not carry the role "+role)
			return
		}
		c.Next()
	}
}

// bearer returns the token of an Authorization: Bearer header (the scheme
// is case-insensitive, RFC 9110).
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// refuse answers 401 with the RFC 6750 challenge; the error is left out
// when the request carried no token, as that RFC asks.
func refuse(c *gin.Context, errParam, detail string) {
	c.Header("WWW-Authenticate", `Bearer realm="oncemall"`+errParam)
	problem.Abort(c, http.StatusUnauthorized, detail)
}
