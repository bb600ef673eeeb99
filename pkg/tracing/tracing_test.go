package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/tracing"
)

func defaults(t *testing.T) tracing.Config {
	t.Helper()
	var c tracing.Config
	if err := config.LoadFrom(&c, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigValidateNamesTheVariable(t *testing.T) {
	if err := defaults(t).Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*tracing.Config)
		want string // the variable named, "" for valid
	}{
		{"unknown exporter", func(c *tracing.Config) { c.Exporter = "jaeger" }, "TRACING_EXPORTER"},
		{"ratio above 1", func(c *tracing.Config) { c.SampleRatio = 1.5 }, "TRACING_SAMPLE_RATIO"},
		{"negative ratio", func(c *tracing.Config) { c.SampleRatio = -0.1 }, "TRACING_SAMPLE_RATIO"},
		{"otlp without a scheme", func(c *tracing.Config) { c.Exporter, c.OTLPEndpoint = "otlp", "localhost:4318" }, "TRACING_OTLP_ENDPOINT"},
		{"otlp without a host", func(c *tracing.Config) { c.Exporter, c.OTLPEndpoint = "otlp", "http://" }, "TRACING_OTLP_ENDPOINT"},
		{"otlp with a base URL", func(c *tracing.Config) { c.Exporter, c.OTLPEndpoint = "otlp", "http://jaeger:4318" }, ""},
		{"an unused endpoint is not checked", func(c *tracing.Config) { c.OTLPEndpoint = "not a url" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults(t)
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestExporterNoneIsOff: the default provider records nothing, every
// component sees it as off, and the client transport is left as it was.
func TestExporterNoneIsOff(t *testing.T) {
	p, err := tracing.New(context.Background(), defaults(t), "svc")
	if err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled(p.TracerProvider()) || tracing.Enabled(nil) {
		t.Fatal("Enabled reports a no-op or nil provider as recording")
	}
	_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("the provider of TRACING_EXPORTER=none started a real span")
	}
	if got := tracing.Transport(p.TracerProvider(), http.DefaultTransport); got != http.DefaultTransport {
		t.Fatalf("Transport with tracing off wrapped the base transport: %T", got)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestOTLPExportIsFlushedAtShutdown: a span ended just before Shutdown
// (the batch would send it only seconds later) reaches the receiver, with
// the service's name, at /v1/traces of the configured base URL.
func TestOTLPExportIsFlushedAtShutdown(t *testing.T) {
	recv := spantest.NewReceiver(t)
	cfg := defaults(t)
	cfg.Exporter, cfg.OTLPEndpoint = tracing.ExporterOTLP, recv.URL
	p, err := tracing.New(context.Background(), cfg, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Enabled(p.TracerProvider()) {
		t.Fatal("the OTLP provider is not enabled")
	}
	_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "last words")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := spantest.Find(t, recv.Spans(t), "last words")
	if got.Service != "svc" || got.Parent != "" {
		t.Fatalf("exported %s from service %q, want a root span of service svc", got, got.Service)
	}
}

// TestSampleRatioAppliesToNewTracesOnly: at ratio 0 a trace this service
// starts is not recorded, but one continued from a sampled caller is, so a
// trace is never recorded in pieces.
func TestSampleRatioAppliesToNewTracesOnly(t *testing.T) {
	recv := spantest.NewReceiver(t)
	cfg := defaults(t)
	cfg.Exporter, cfg.OTLPEndpoint, cfg.SampleRatio = tracing.ExporterOTLP, recv.URL, 0
	p, err := tracing.New(context.Background(), cfg, "svc")
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TracerProvider().Tracer("t")
	_, own := tr.Start(context.Background(), "own trace")
	own.End()
	caller := tracing.Extract(context.Background(), map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	_, continued := tr.Start(caller, "continued trace")
	continued.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans(t)
	if len(spantest.Named(spans, "own trace")) != 0 {
		t.Error("a new trace was recorded at TRACING_SAMPLE_RATIO=0")
	}
	if got := spantest.Find(t, spans, "continued trace"); got.TraceID != "0af7651916cd43dd8448eb211c80319c" || got.Parent != "b7ad6b7169203331" {
		t.Errorf("the continued span %s is not the caller's child", got)
	}
}

// TestRequestIDTravelsWithTheTrace: what Inject writes (as the outbox
// stores it in a row) gives back, through Extract, the same trace and the
// request id.
func TestRequestIDTravelsWithTheTrace(t *testing.T) {
	rec := spantest.NewRecorder(t)
	ctx, span := rec.Provider.Tracer("t").Start(context.Background(), "request")
	defer span.End()
	ctx = tracing.WithRequestID(ctx, "req-42")

	headers := map[string]string{}
	tracing.Inject(ctx, headers)
	if !strings.Contains(headers["traceparent"], span.SpanContext().TraceID().String()) || !strings.Contains(headers["baggage"], "request_id=req-42") {
		t.Fatalf("injected %v, want the span's traceparent and request_id in the baggage", headers)
	}
	back := tracing.Extract(context.Background(), headers)
	if got := trace.SpanContextFromContext(back); got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %v, want the request's span as a remote parent", got)
	}
	if got := tracing.RequestID(back); got != "req-42" {
		t.Fatalf("request id %q after the round trip, want req-42", got)
	}

	empty := map[string]string{}
	tracing.Inject(context.Background(), empty)
	if len(empty) != 0 {
		t.Fatalf("a context in no trace injected %v", empty)
	}
}

// TestTransportCarriesTheTraceToTheServer: a request made through the
// transport runs in a client span of the caller's trace, and the server
// receives that span as its parent, with the request id in the baggage.
func TestTransportCarriesTheTraceToTheServer(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	rec := spantest.NewRecorder(t)
	ctx, parent := rec.Provider.Tracer("t").Start(context.Background(), "handler")
	ctx = tracing.WithRequestID(ctx, "req-7")
	client := &http.Client{Transport: tracing.Transport(rec.Provider, http.DefaultTransport)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/internal/orders/O1/paid", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()

	h := <-got
	spans := rec.Spans()
	call := spantest.Find(t, spans, "HTTP POST")
	spantest.ChildOf(t, call, spantest.Find(t, spans, "handler"))
	if tp := h.Get("traceparent"); !strings.Contains(tp, call.TraceID+"-"+call.SpanID) {
		t.Fatalf("server got traceparent %q, want the client span %s", tp, call)
	}
	if b := h.Get("baggage"); !strings.Contains(b, "request_id=req-7") {
		t.Fatalf("server got baggage %q, want the request id", b)
	}
	if id := h.Get(tracing.RequestIDHeader); id != "req-7" {
		t.Fatalf("server got %s %q, want the caller's request id", tracing.RequestIDHeader, id)
	}
	if req.Header.Get(tracing.RequestIDHeader) != "" {
		t.Fatalf("the transport changed the caller's request")
	}
}
