package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
)

// errTrailingData reports a body with more after its JSON object.
var errTrailingData = errors.New("trailing data after the JSON object")

// DecodeJSON reads the request body into v strictly: exactly one JSON
// object, no unknown fields (a typo such as "coupon" for "coupon_id" must not
// silently drop the field), nothing after it. When it cannot, it answers
// 413 (body over the limit) or 400 with a problem document and returns
// false; the handler then just returns, having written nothing.
func DecodeJSON(c *gin.Context, v any) bool {
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, tokErr := dec.Token(); !errors.Is(tokErr, io.EOF) {
			err = errTrailingData
		}
	}
	switch {
	case err == nil:
		return true
	case IsBodyTooLarge(err):
		problem.Abort(c, http.StatusRequestEntityTooLarge, "request body too large")
	default:
		problem.Abort(c, http.StatusBadRequest, "malformed JSON body: "+err.Error())
	}
	return false
}
