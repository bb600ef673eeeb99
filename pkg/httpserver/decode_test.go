package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
)

func TestDecodeJSON(t *testing.T) {
	type req struct {
		Amount int64 `json:"amount"`
	}
	tests := []struct {
		name, body string
		want       int
		typ        string // the request's Content-Type; "" is application/json
	}{
		{"one object", `{"amount":5}`, http.StatusOK, ""},
		{"with a charset", `{"amount":5}`, http.StatusOK, "application/json; charset=utf-8"},
		{"a +json type", `{"amount":5}`, http.StatusOK, "application/merge-patch+json"},
		{"sent as text", `{"amount":5}`, http.StatusUnsupportedMediaType, "text/plain"},
		{"sent as a form", `{"amount":5}`, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"sent as XML", `{"amount":5}`, http.StatusUnsupportedMediaType, "application/xml"},
		{"no Content-Type", `{"amount":5}`, http.StatusUnsupportedMediaType, "none"},
		{"trailing whitespace", "{\"amount\":5}\n", http.StatusOK, ""},
		{"unknown field", `{"amount":5,"coupon":1}`, http.StatusBadRequest, ""},
		{"trailing object", `{"amount":5}{"amount":6}`, http.StatusBadRequest, ""},
		{"trailing garbage", `{"amount":5} x`, http.StatusBadRequest, ""},
		{"not JSON", `amount=5`, http.StatusBadRequest, ""},
		{"empty", ``, http.StatusBadRequest, ""},
		{"over the limit", `{"amount":` + strings.Repeat("1", 64) + `}`, http.StatusRequestEntityTooLarge, ""},
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.Use(httpserver.BodyLimit(40))
	decoded := 0
	e.POST("/", func(c *gin.Context) {
		var r req
		if !httpserver.DecodeJSON(c, &r) {
			return
		}
		decoded++
		c.Status(http.StatusOK)
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			// No Content-Length, so an oversized body is caught while read.
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			r.ContentLength = -1
			switch tt.typ {
			case "":
				r.Header.Set("Content-Type", "application/json")
			case "none":
			default:
				r.Header.Set("Content-Type", tt.typ)
			}
			before := decoded
			e.ServeHTTP(rec, r)
			if tt.want != http.StatusOK && decoded != before {
				t.Fatalf("the handler ran past a refused body")
			}
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if tt.want != http.StatusOK && rec.Header().Get("Content-Type") != problem.ContentType {
				t.Fatalf("content type %q, want a problem document", rec.Header().Get("Content-Type"))
			}
		})
	}
}
