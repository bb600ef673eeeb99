package httpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/problem"
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-ID"

// RequestID takes the caller's X-Request-ID (when it is short and printable)
// or makes one, puts it on the response and in the request context, where the
// logger picks it up.
func RequestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !validRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Header(RequestIDHeader, id)
		c.Request = c.Request.WithContext(logging.WithRequestID(c.Request.Context(), id))
		c.Next()
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// AccessLog logs one line per request after it is served.
func AccessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelInfo
		switch {
		case status >= 500:
			level = slog.LevelError
		case isProbe(c.Request.URL.Path):
			level = slog.LevelDebug
		}
		attrs := []any{
			"method", c.Request.Method,
			"path", c.Request.URL.Path,
			"route", c.FullPath(),
			"status", status,
			"duration_ms", float64(time.Since(start).Microseconds()) / 1000,
			"bytes", c.Writer.Size(),
		}
		if len(c.Errors) > 0 {
			attrs = append(attrs, "err", c.Errors.String())
		}
		log.Log(c.Request.Context(), level, "http request", attrs...)
	}
}

// Recovery turns a panic into a logged 500 problem instead of a dropped
// connection.
func Recovery(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(r)
				}
				log.ErrorContext(c.Request.Context(), "panic serving request", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				if !c.Writer.Written() {
					problem.Abort(c, http.StatusInternalServerError, "internal error")
				}
				c.Abort()
			}
		}()
		c.Next()
	}
}

// Deadline gives every request a deadline d from its start: the handler's
// context ends then, so its database and network calls give up, and a
// handler that returns without having answered is answered 503 with a
// jittered Retry-After (Unavailable). /healthz, /readyz and /metrics keep
// their own short timeouts and are not affected. d <= 0 sets no deadline.
func Deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if d <= 0 {
			c.Next()
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !c.Writer.Written() {
			Unavailable(c, fmt.Sprintf("the request took longer than its %s deadline", d))
		}
	}
}

// Ended answers a request whose handler failed because the request itself
// ended, and reports whether it did; error maps call it before their 500.
// Past the deadline (Deadline) the answer is the middleware's own, 503
// with a jittered Retry-After (Unavailable); a client that went away is
// recorded as problem.StatusClientClosed. Neither is the service failing,
// so both are logged at info, not as errors.
func Ended(c *gin.Context, log *slog.Logger, err error) bool {
	ctx := c.Request.Context()
	switch {
	case ctx.Err() == nil, !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		log.InfoContext(ctx, "request ended at its deadline", "path", c.FullPath(), "err", err)
		Unavailable(c, "the request took longer than its deadline")
	default:
		log.InfoContext(ctx, "request abandoned by its client", "path", c.FullPath(), "err", err)
		c.AbortWithStatus(problem.StatusClientClosed)
	}
	return true
}

// BodyLimit caps the request body at limit bytes. A body declared larger is
// refused at once with 413; a body that grows past the limit while read makes
// the reader fail, which handlers report as 413 through IsBodyTooLarge.
func BodyLimit(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if limit <= 0 {
			c.Next()
			return
		}
		if c.Request.ContentLength > limit {
			problem.Abort(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
		c.Next()
	}
}

// IsBodyTooLarge reports whether err came from reading past the body limit.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// AdminAuth guards admin endpoints with a bearer token compared in constant
// time. An empty configured token refuses every request, so a missing
// setting never opens the endpoints.
func AdminAuth(token string) gin.HandlerFunc {
	want := []byte(token)
	return func(c *gin.Context) {
		got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !ok || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="oncemall-admin"`)
			problem.Abort(c, http.StatusUnauthorized, "admin token missing or wrong")
			return
		}
		c.Next()
	}
}

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}
