package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
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

// refuseOrFail answers a refused lock as 422 problem+json carrying the
// refusal's reason (coupon.RefusalReason: not_found, not_owner,
// not_available, expired, below_minimum), which the order service passes
// on; anything else goes to fail. An unknown coupon is a refusal here, not
// a 404: the route exists, the coupon the order names does not.
func (api *API) refuseOrFail(c *gin.Context, err error) {
	if reason, ok := coupon.RefusalReason(err); ok {
		problem.Write(c, problem.New(http.StatusUnprocessableEntity, err.Error()).With("reason", reason))
		return
	}
	api.fail(c, err)
}

// fail answers err as problem+json with its status.
func (api *API) fail(c *gin.Context, err error) {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			problem.Abort(c, s.status, err.Error())
			return
		}
	}
	if httpserver.Ended(c, api.opts.Log, err) || httpserver.Unreachable(c, api.opts.Log, err) {
		return
	}
	api.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
	problem.Abort(c, http.StatusInternalServerError, "internal error")
}
