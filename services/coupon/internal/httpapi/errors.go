package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// statuses maps the domain's errors to the status they are answered with,
// first match wins. Anything else is a 500, logged here and answered
// without its text.
var statuses = []struct {
	err    error
	status int
}{
	{coupon.ErrInvalid, http.StatusBadRequest},
	{coupon.ErrUnknownTemplate, http.StatusUnprocessableEntity},
	{coupon.ErrNotFound, http.StatusNotFound},
}

// fail answers err as problem+json with its status.
func (h *API) fail(c *gin.Context, err error) {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			problem.Abort(c, s.status, err.Error())
			return
		}
	}
	h.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
	problem.Abort(c, http.StatusInternalServerError, "internal error")
}
