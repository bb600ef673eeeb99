// Package logging builds the JSON slog logger every service uses.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Config is the logging part of a service configuration.
type Config struct {
	Level string `env:"LOG_LEVEL" default:"info" usage:"log level: debug, info, warn or error"`
}

// Validate reports an unknown level.
func (c Config) Validate() error {
	_, err := parseLevel(c.Level)
	return err
}

// New returns a JSON logger writing to w, tagged with the service name. Records
// logged with a context that carries a request id (see WithRequestID) get a
// "request_id" attribute, and those logged in a trace a "trace_id", the id
// to search for in the tracing UI.
func New(w io.Writer, service string, cfg Config) (*slog.Logger, error) {
	level, err := parseLevel(cfg.Level)
	if err != nil {
		return nil, err
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(requestIDHandler{h}).With("service", service), nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("config: LOG_LEVEL=%q: must be debug, info, warn or error", s)
	}
	return l, nil
}

type ctxKey struct{}

// WithRequestID returns a context that carries the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// requestIDHandler adds the context's request id and trace id to every
// record. Without a trace (tracing off) the trace lookup finds nothing and
// allocates nothing.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
