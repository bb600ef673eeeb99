package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// writeError maps a use case's error to its status, as
// application/problem+json; this is the only place that does. Unexpected errors are logged here, once, and answered 500
// without their text.
func (api *API) writeError(c *gin.Context, err error) {
	var status int
	switch {
	case errors.Is(err, payment.ErrNotFound), errors.Is(err, payment.ErrOrderNotFound), errors.Is(err, payment.ErrRefundNotFound):
		status = http.StatusNotFound
	case errors.Is(err, payment.ErrOrderNotPayable), errors.Is(err, payment.ErrOrderClosed), errors.Is(err, payment.ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, payment.ErrAmountMismatch):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, payment.ErrPlatformRejected), errors.Is(err, payment.ErrPlatformUnavailable):
		status = http.StatusBadGateway
	case errors.Is(err, app.ErrBusy):
		httpserver.Unavailable(c, err.Error())
		return
	case errors.Is(err, payment.ErrOrderServiceUnavailable):
		// Nothing was decided; the cause names another service's address,
		// so it is logged, not sent.
		api.opts.Log.WarnContext(c.Request.Context(), "request failed on the order service", "path", c.FullPath(), "err", err)
		httpserver.Unavailable(c, "the order service is unavailable; retry")
		return
	case httpserver.Ended(c, api.opts.Log, err), httpserver.Unreachable(c, api.opts.Log, err):
		return
	default:
		api.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
		return
	}
	problem.Abort(c, status, err.Error())
}

// callbackOutcome maps a callback use case's error to the outcome label
// of payment_callbacks_total, beside its status above.
func callbackOutcome(err error) string {
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return "unknown_payment"
	case errors.Is(err, payment.ErrRefundNotFound):
		return "unknown_refund"
	case errors.Is(err, payment.ErrAmountMismatch):
		return "amount_mismatch"
	case errors.Is(err, payment.ErrConflict):
		return "conflict"
	case errors.Is(err, app.ErrBusy):
		return "locked"
	}
	return "error"
}
