// Package tracing sets up a service's OpenTelemetry tracing and fixes how a
// trace crosses what the platform connects: HTTP requests, outbox rows,
// JetStream messages and inbox deliveries all carry it in the W3C
// traceparent and baggage headers, and the baggage carries the request id.
//
// Tracing is off unless TRACING_EXPORTER says otherwise, and off means off:
// the provider is a no-op, Enabled reports false, and every component of
// pkg skips its tracing entirely, so a service that does not trace pays
// nothing for the ability to. docs/observability.md lists the spans.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncemall/oncemall/pkg/config"
)

// The exporters TRACING_EXPORTER accepts.
const (
	// ExporterNone records nothing: the default.
	ExporterNone = "none"
	// ExporterOTLP sends spans over OTLP/HTTP to TRACING_OTLP_ENDPOINT
	// (Jaeger, an OpenTelemetry collector).
	ExporterOTLP = "otlp"
)

// Config is the tracing part of a service configuration; the platform
// embeds it, so every service reads the same TRACING_* variables.
type Config struct {
	Exporter string `env:"TRACING_EXPORTER" default:"none" usage:"where spans go: none (tracing off, no cost) or otlp (OTLP/HTTP to TRACING_OTLP_ENDPOINT)"`
	// OTLPEndpoint is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: the
	// spans are posted to its /v1/traces unless it names a path itself.
	OTLPEndpoint string `env:"TRACING_OTLP_ENDPOINT" default:"http://localhost:4318" usage:"base URL of the OTLP/HTTP receiver (Jaeger, a collector); spans are posted to its /v1/traces"`
	// SampleRatio applies to the traces a service starts; a trace that
	// arrives with a traceparent keeps the caller's decision, so a trace is
	// recorded whole or not at all.
	SampleRatio float64 `env:"TRACING_SAMPLE_RATIO" default:"1" usage:"share of the traces this service starts that are recorded, from 0 to 1; a continued trace keeps its caller's decision"`
}

// Validate reports unusable settings, each naming its variable. The
// endpoint is checked only when it is used.
func (c Config) Validate() error {
	errs := []error{
		config.CheckOneOf("TRACING_EXPORTER", c.Exporter, ExporterNone, ExporterOTLP),
		config.CheckRange("TRACING_SAMPLE_RATIO", c.SampleRatio, 0, 1),
	}
	if c.Exporter == ExporterOTLP {
		if _, err := tracesURL(c.OTLPEndpoint); err != nil {
			errs = append(errs, &config.Error{Var: "TRACING_OTLP_ENDPOINT", Value: c.OTLPEndpoint, Err: err})
		}
	}
	return errors.Join(errs...)
}

// tracesURL is where the spans are posted: endpoint's /v1/traces, or
// endpoint itself when it names a path.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("must be an http:// or https:// URL with a host, e.g. http://localhost:4318")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Provider is a service's tracer provider and what its shutdown must flush.
type Provider struct {
	tp  trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// New returns the provider cfg describes for the service named service
// (its service.name in every span): a no-op one when the exporter is none,
// otherwise one that samples new traces at cfg.SampleRatio, follows the
// caller's decision in continued ones, and exports in batches.
func New(ctx context.Context, cfg Config, service string) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exporter == ExporterNone {
		return &Provider{tp: noop.NewTracerProvider()}, nil
	}
	endpoint, _ := tracesURL(cfg.OTLPEndpoint) // checked by Validate
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Default() brings the SDK's own attributes and OTEL_RESOURCE_ATTRIBUTES;
	// the service name given here wins over them.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	return &Provider{tp: sdk, sdk: sdk}, nil
}

// TracerProvider is what the components start their spans with: pass it to
// httpserver.Options, outbox.Config, inbox.Config and Transport.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Shutdown exports the spans still buffered and stops the exporter. Call it
// last, once nothing starts spans any more (after the relay has stopped),
// or the last spans of the process are lost.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush: %w", err)
	}
	return nil
}

// Enabled reports whether tp records spans. A nil provider and a no-op one
// (tracing off) do not; a component checks once, at construction, and then
// skips its tracing altogether, which is what makes tracing off cost nothing:
// even a no-op span allocates its context.
func Enabled(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider:
		return false
	}
	return true
}
