package formtoken

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
)

// Header carries a form token on the submit.
const Header = "X-Form-Token"

// Subject names the caller a token is issued to and spent by, "" for none:
// the verified user (auth.Subject) behind auth.Middleware.
type Subject func(*gin.Context) string

// IssueHandler answers GET …/token with a fresh token for the caller subject
// names: {"token": "…", "expires_in": seconds}; 401 without a caller.
func (s *Store) IssueHandler(subject Subject) gin.HandlerFunc {
	return func(c *gin.Context) {
		subject := subject(c)
		if subject == "" {
			problem.Abort(c, http.StatusUnauthorized, "a caller is required to issue a form token")
			return
		}
		token, err := s.Issue(c.Request.Context(), subject)
		if err != nil {
			problem.Abort(c, http.StatusServiceUnavailable, "could not issue a form token")
			return
		}
		c.Header("Cache-Control", "no-store")
		c.JSON(http.StatusOK, gin.H{"token": token, "expires_in": int(s.cfg.TTL.Seconds())})
	}
}

// Require consumes the X-Form-Token of the request before the handler runs.
// A token that is unknown, expired, issued to someone else or already used
// is refused with 409. With required false, a request without the header
// passes (clients that send an Idempotency-Key instead).
//
// The token is spent before the handler runs: if the handler then fails, the
// user must reload the form. That is the scheme's known cost, and why retries
// rely on Idempotency-Key instead. Install it after the idempotency
// middleware, so a retry with the same Idempotency-Key is replayed without
// needing a second token:
//
//	r.POST("/orders", v.Middleware(log), idem.HandlerInTx(), tokens.Require(auth.Subject, false), h.createOrder)
func (s *Store) Require(subject Subject, required bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		token := c.GetHeader(Header)
		if token == "" {
			if required {
				problem.Abort(c, http.StatusBadRequest, Header+" is required; fetch one with the form")
				return
			}
			c.Next()
			return
		}
		ok, err := s.Consume(c.Request.Context(), subject(c), token)
		if err != nil {
			problem.Abort(c, http.StatusServiceUnavailable, "could not check the form token")
			return
		}
		if !ok {
			problem.Abort(c, http.StatusConflict, "this form was already submitted, or its token expired; reload the form")
			return
		}
		c.Next()
	}
}
