package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// The codes of a 409 answer (its "code" member).
const (
	CodeOutOfStock      = "out_of_stock"     // too little stock for an item
	CodePriceChanged    = "price_changed"    // a price moved while the order was placed; retry
	CodeStockContention = "stock_contention" // the optimistic stock variant gave up; retry
	CodeStateConflict   = "state_conflict"   // the order's status does not allow it (cancel a paid order)
)

func conflictCode(err error) string {
	switch {
	case errors.Is(err, order.ErrOutOfStock):
		return CodeOutOfStock
	case errors.Is(err, order.ErrPriceChanged):
		return CodePriceChanged
	case errors.Is(err, order.ErrStockContention):
		return CodeStockContention
	}
	return CodeStateConflict
}

// fail answers c with the status err means, as problem+json: the one place
// where the use cases' errors become HTTP statuses. Only what becomes a 500
// is logged.
func (h *API) fail(c *gin.Context, err error) {
	var dup *product.DuplicateError
	var refused *order.CouponRefusedError
	switch {
	case errors.Is(err, idempotency.ErrDuplicateRequest):
		// Another request with this Idempotency-Key committed first; the
		// transaction rolled back and the middleware answers from its record.
		c.Abort()
	case errors.As(err, &dup):
		problem.Write(c, problem.New(http.StatusConflict, dup.Error()).
			With("existing_id", dup.ExistingID).With("name", dup.Key.Name).With("model", dup.Key.Model))
	case errors.As(err, &refused):
		problem.Write(c, problem.New(http.StatusUnprocessableEntity, refused.Error()).
			With("coupon_id", refused.CouponID).With("reason", refused.Reason))
	case errors.Is(err, order.ErrInvalid), errors.Is(err, product.ErrInvalid):
		problem.Abort(c, http.StatusBadRequest, err.Error())
	case errors.Is(err, order.ErrNotFound), errors.Is(err, product.ErrNotFound):
		problem.Abort(c, http.StatusNotFound, err.Error())
	case errors.Is(err, order.ErrProductUnavailable):
		problem.Abort(c, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, order.ErrConflict), errors.Is(err, order.ErrOutOfStock),
		errors.Is(err, order.ErrPriceChanged), errors.Is(err, order.ErrStockContention):
		// 409 releases an Idempotency-Key (idempotency.DefaultTerminal): a
		// retry runs again, and may find stock, or the new price. The code
		// tells a client which of them it met.
		problem.Write(c, problem.New(http.StatusConflict, err.Error()).With("code", conflictCode(err)))
	case errors.Is(err, order.ErrUnavailable):
		// Nothing was decided; the same request may succeed in a moment.
		// The cause names another service's address, so it is logged, not
		// sent.
		h.opts.Log.WarnContext(c.Request.Context(), "request failed on a service it depends on", "path", c.FullPath(), "err", err)
		httpserver.Unavailable(c, "a service this request depends on is unavailable; retry")
	case httpserver.Ended(c, h.opts.Log, err), httpserver.Unreachable(c, h.opts.Log, err):
	default:
		h.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
	}
}
