// Package problem writes RFC 9457 problem details (application/problem+json),
// the one error format every oncemall endpoint answers with.
package problem

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// StatusClientClosed is what a request whose client went away before the
// answer is recorded as (nginx's 499). Nobody reads it; access logs and
// metrics say what happened instead of a 500 or a 200, and the
// Idempotency-Key layer gives the key back rather than store it.
const StatusClientClosed = 499

// Details is a problem document. Extra members go in Extensions.
type Details struct {
	Type       string         `json:"type,omitempty"`
	Title      string         `json:"title"`
	Status     int            `json:"status"`
	Detail     string         `json:"detail,omitempty"`
	Instance   string         `json:"instance,omitempty"`
	Extensions map[string]any `json:"-"`
}

// MarshalJSON flattens Extensions into the document, as the RFC asks.
func (d Details) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(d.Extensions)+5)
	for k, v := range d.Extensions {
		m[k] = v
	}
	m["title"] = d.Title
	m["status"] = d.Status
	if d.Type != "" {
		m["type"] = d.Type
	}
	if d.Detail != "" {
		m["detail"] = d.Detail
	}
	if d.Instance != "" {
		m["instance"] = d.Instance
	}
	return json.Marshal(m)
}

// New returns a problem with the standard title for status.
func New(status int, detail string) Details {
	return Details{Title: http.StatusText(status), Status: status, Detail: detail}
}

// With returns a copy of d with one extension member added.
func (d Details) With(key string, value any) Details {
	ext := make(map[string]any, len(d.Extensions)+1)
	for k, v := range d.Extensions {
		ext[k] = v
	}
	ext[key] = value
	d.Extensions = ext
	return d
}

// Write sends d and aborts the gin chain.
func Write(c *gin.Context, d Details) {
	if d.Instance == "" {
		d.Instance = c.Request.URL.Path
	}
	body, err := json.Marshal(d)
	if err != nil {
		body = []byte(`{"title":"Internal Server Error","status":500}`)
		d.Status = http.StatusInternalServerError
	}
	c.Abort()
	c.Data(d.Status, ContentType, body)
}

// Abort writes a problem with the standard title for status and detail.
func Abort(c *gin.Context, status int, detail string) {
	Write(c, New(status, detail))
}
