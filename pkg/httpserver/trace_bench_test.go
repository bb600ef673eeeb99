package httpserver_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// BenchmarkServerTracing serves one request through the whole middleware
// stack, with tracing never configured (none), with the no-op provider
// TRACING_EXPORTER=none gives (off), and recording every span into a batch
// exporter that discards them (on). Off must cost what none costs: run
//
//	cd pkg && go test -run '^$' -bench ServerTracing -benchmem ./httpserver/
func BenchmarkServerTracing(b *testing.B) {
	on := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = on.Shutdown(b.Context()) })
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"none", nil}, {"off", noop.NewTracerProvider()}, {"on", on}} {
		for _, caller := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
			name := tc.name
			if caller != "" {
				name += "/traceparent"
			}
			b.Run(name, func(b *testing.B) {
				s, err := httpserver.New(httpserver.Options{
					Addr:           "127.0.0.1:0",
					Config:         httpserver.Config{BodyLimitBytes: 1 << 10},
					Logger:         slog.New(slog.NewJSONHandler(io.Discard, nil)),
					Registry:       prometheus.NewRegistry(),
					TracerProvider: tc.tp,
				})
				testenv.Must(b, err)
				s.Engine().POST("/orders/:no/pay", func(c *gin.Context) { c.Status(http.StatusAccepted) })
				h := s.Engine() // as Listen serves it
				req := httptest.NewRequest(http.MethodPost, "/orders/O42/pay", nil)
				req.Header.Set(httpserver.RequestIDHeader, "bench-request-id")
				if caller != "" {
					req.Header.Set("traceparent", caller)
				}
				b.ReportAllocs()
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusAccepted {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		}
	}
}
