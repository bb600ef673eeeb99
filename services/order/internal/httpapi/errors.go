package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// fail answers c with the status err means, as problem+json: the one place
// where the use cases' errors become HTTP statuses. Only what becomes a 500
// is logged.
func (h *Handler) fail(c *gin.Context, err error) {
	var dup *product.DuplicateError
	switch {
	case errors.Is(err, idempotency.ErrDuplicateRequest):
		// Another request with this Idempotency-Key committed first; the
		// transaction rolled back and the middleware answers from its record.
		c.Abort()
	case errors.As(err, &dup):
		problem.Write(c, problem.New(http.StatusConflict, dup.Error()).
			With("existing_id", dup.ExistingID).With("name", dup.Key.Name).With("model", dup.Key.Model))
	case errors.Is(err, order.ErrInvalid), errors.Is(err, product.ErrInvalid):
		problem.Abort(c, http.StatusBadRequest, err.Error())
	case errors.Is(err, order.ErrNotFound), errors.Is(err, product.ErrNotFound):
		problem.Abort(c, http.StatusNotFound, err.Error())
	case errors.Is(err, order.ErrConflict):
		problem.Abort(c, http.StatusConflict, err.Error())
	default:
		h.opts.Log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
		problem.Abort(c, http.StatusInternalServerError, "internal error")
	}
}
