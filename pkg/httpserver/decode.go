package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
)

// errTrailingData reports a body with more after its JSON object.
var errTrailingData = errors.New("trailing data after the JSON object")

// isTimeout reports a read that hit the server's read deadline
// (HTTP_READ_TIMEOUT): the body was trickled or stalled.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// DecodeJSON reads the request body into v strictly: exactly one JSON
// object, no unknown fields (a typo such as "coupon" for "coupon_id" must not
// silently drop the field), nothing after it. When it cannot, it answers
// 413 (body over the limit), 408 (body too slow) or 400 with a problem document and returns
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
	case isTimeout(err):
		problem.Abort(c, http.StatusRequestTimeout, "the request body did not arrive in time")
	default:
		problem.Abort(c, http.StatusBadRequest, "malformed JSON body: "+err.Error())
	}
	return false
}
