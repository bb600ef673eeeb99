package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/identity/internal/app"
)

// statuses maps the use cases' errors to their status and the OAuth error
// code (RFC 6749 §5.2) the problem carries as "error", first match wins.
// Anything else is a 500, logged here and answered without its text.
var statuses = []struct {
	err    error
	status int
	code   string
}{
	{app.ErrInvalidCredentials, http.StatusUnauthorized, "invalid_grant"},
	{app.ErrTooManyAttempts, http.StatusTooManyRequests, "invalid_grant"},
	{app.ErrUnknownAudience, http.StatusBadRequest, "invalid_target"},
	{app.ErrInvalidRequest, http.StatusBadRequest, "invalid_request"},
}

// fail answers err as problem+json with its status.
func (h *API) fail(c *gin.Context, err error) {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			switch s.status {
			case http.StatusUnauthorized:
				c.Header("WWW-Authenticate", `Basic realm="oncemall"`)
			case http.StatusTooManyRequests:
				c.Header("Retry-After", strconv.Itoa(max(1, int(h.opts.LoginWindow.Seconds()))))
			}
			problem.Write(c, problem.New(s.status, err.Error()).With("error", s.code))
			return
		}
	}
	if httpserver.Ended(c, h.opts.Log, err) || httpserver.Unreachable(c, h.opts.Log, err) {
		return
	}
	h.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
	problem.Abort(c, http.StatusInternalServerError, "internal error")
}
