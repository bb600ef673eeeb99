package auth

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
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
		if v.authenticate(c, log) {
			c.Next()
		}
	}
}

// Operator guards operator routes (/admin): a person signs in and presents
// an access token carrying RoleOperator (403 without the role), a machine
// presents the service's own credential, which machine checks
// (platform.Wiring.Admin: the ADMIN_TOKEN bearer). A bearer shaped like a
// JWT (three dot-separated parts) is only ever checked as a token.
func (v *Verifier) Operator(log *slog.Logger, machine gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw, ok := bearer(c.GetHeader("Authorization"))
		if !ok || strings.Count(raw, ".") != 2 {
			machine(c)
			return
		}
		if !v.authenticate(c, log) {
			return
		}
		if p, _ := User(c); !p.HasRole(RoleOperator) {
			problem.Abort(c, http.StatusForbidden, "the token does not carry the role "+RoleOperator)
			return
		}
		c.Next()
	}
}

// authenticate verifies c's bearer token and puts its Principal in the
// request's context, or answers (401, or 503 when the keys are out of
// reach) and returns false.
func (v *Verifier) authenticate(c *gin.Context, log *slog.Logger) bool {
	raw, ok := bearer(c.GetHeader("Authorization"))
	if !ok {
		refuse(c, "", "a bearer token is required (Authorization: Bearer <access token>)")
		return false
	}
	p, err := v.Verify(c.Request.Context(), raw)
	switch {
	case errors.Is(err, ErrKeysUnavailable):
		log.ErrorContext(c.Request.Context(), "token not checked", "err", err)
		c.Header("Retry-After", "1")
		problem.Abort(c, http.StatusServiceUnavailable, "the token cannot be checked now: the identity service's keys are out of reach")
		return false
	case err != nil:
		refuse(c, `, error="invalid_token"`, "the token is invalid or expired")
		return false
	}
	c.Request.Header.Del(UserIDHeader)
	c.Request = c.Request.WithContext(WithPrincipal(c.Request.Context(), p))
	return true
}

// User returns the principal Middleware verified for c's request.
func User(c *gin.Context) (Principal, bool) { return FromContext(c.Request.Context()) }

// Subject is the verified user of c's request as a decimal string, "" when
// Middleware did not verify one: the caller a form token or an
// Idempotency-Key is scoped to.
func Subject(c *gin.Context) string {
	if p, ok := User(c); ok {
		return strconv.FormatUint(p.UserID, 10)
	}
	return ""
}

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
