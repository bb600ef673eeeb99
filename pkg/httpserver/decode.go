package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"

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

// IsJSON reports whether contentType is application/json or a JSON
// structured syntax (application/problem+json), parameters allowed.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func quoteType(ct string) string {
	if ct == "" {
		return "without a Content-Type"
	}
	return "as " + ct
}

// DecodeJSON reads the request body into v strictly: exactly one JSON
// object, no unknown fields (a typo such as "coupon" for "coupon_id" must not
// silently drop the field), nothing after it, sent as JSON (IsJSON). When it
// cannot, it answers 415 (another Content-Type, or none), 413 (body over the
// limit), 408 (body too slow) or 400 with a problem document and returns
// false; the handler then just returns, having written nothing.
func DecodeJSON(c *gin.Context, v any) bool {
	if ct := c.GetHeader("Content-Type"); !IsJSON(ct) {
		problem.Abort(c, http.StatusUnsupportedMediaType, "the body must be sent as application/json, not "+quoteType(ct))
		return false
	}
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
