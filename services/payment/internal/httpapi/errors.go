package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// writeError maps a use case's error to its status; this is the only place
// that does. Unexpected errors are logged here, once, and answered 500
// without their text.
func (h *handlers) writeError(c *gin.Context, err error) {
	var status int
	switch {
	case errors.Is(err, payment.ErrNotFound), errors.Is(err, payment.ErrOrderNotFound):
		status = http.StatusNotFound
	case errors.Is(err, payment.ErrOrderNotPayable), errors.Is(err, payment.ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, payment.ErrAmountMismatch):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, payment.ErrPlatformRejected):
		status = http.StatusBadGateway
	case errors.Is(err, errBusy):
		c.Header("Retry-After", "1")
		status = http.StatusServiceUnavailable
	default:
		h.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
		return
	}
	problem.Abort(c, status, err.Error())
}
