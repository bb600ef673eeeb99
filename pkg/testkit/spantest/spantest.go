// Package spantest collects the spans of the code under test, so a test can
// check what a trace shows: a Recorder keeps them in memory from a real SDK
// provider (for components given a TracerProvider), a Receiver takes them
// over OTLP/HTTP as Jaeger would (for a whole service configured through
// TRACING_*). Both give them as Spans, so the checks read the same.
package spantest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one ended span, its ids in hex as a traceparent writes them and
// its attribute values as strings ("true", "3").
type Span struct {
	Name    string
	Service string // the resource's service.name ("" from a Recorder)
	TraceID string
	SpanID  string
	Parent  string // "" for a root span
	Kind    string // "server", "client", "producer", "consumer", "internal"
	Attrs   map[string]string
	Failed  bool // status Error
}

// String is the span as a test failure prints it.
func (s Span) String() string {
	return fmt.Sprintf("%q trace=%s span=%s parent=%s %v", s.Name, s.TraceID, s.SpanID, s.Parent, s.Attrs)
}

// Recorder is an SDK tracer provider that records every span, sampled
// always, synchronously: a span is in Spans as soon as it ended.
type Recorder struct {
	// Provider is what the code under test is given.
	Provider *sdktrace.TracerProvider
	rec      *tracetest.SpanRecorder
}

// NewRecorder returns a Recorder shut down when the test ends.
func NewRecorder(t testing.TB) *Recorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return &Recorder{Provider: tp, rec: rec}
}

// Spans returns the spans ended so far, in the order they ended.
func (r *Recorder) Spans() []Span {
	var out []Span
	for _, s := range r.rec.Ended() {
		sp := Span{
			Name:    s.Name(),
			TraceID: s.SpanContext().TraceID().String(),
			SpanID:  s.SpanContext().SpanID().String(),
			Kind:    s.SpanKind().String(),
			Attrs:   map[string]string{},
			Failed:  s.Status().Code.String() == "Error",
		}
		if p := s.Parent(); p.IsValid() {
			sp.Parent = p.SpanID().String()
		}
		for _, kv := range s.Attributes() {
			sp.Attrs[string(kv.Key)] = kv.Value.String()
		}
		out = append(out, sp)
	}
	return out
}

// Receiver is an OTLP/HTTP endpoint: point TRACING_OTLP_ENDPOINT at URL.
type Receiver struct {
	URL string

	mu    sync.Mutex
	spans []Span
	errs  []string
}

// NewReceiver starts a Receiver, stopped when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Spans returns the spans received so far, in the order they arrived. It
// fails t if an export was malformed.
func (r *Receiver) Spans(t testing.TB) []Span {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("OTLP receiver: %s", strings.Join(r.errs, "; "))
	}
	return slices.Clone(r.spans)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	fail := func(format string, args ...any) {
		r.mu.Lock()
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
		r.mu.Unlock()
		http.Error(w, "bad export", http.StatusBadRequest)
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		fail("%s %s, want POST /v1/traces", req.Method, req.URL.Path)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		fail("read: %v", err)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		fail("decode (Content-Type %s): %v", req.Header.Get("Content-Type"), err)
		return
	}
	var got []Span
	for _, rs := range export.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name:    s.GetName(),
					Service: service,
					TraceID: fmt.Sprintf("%x", s.GetTraceId()),
					SpanID:  fmt.Sprintf("%x", s.GetSpanId()),
					Kind:    strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
					Attrs:   attrs(s.GetAttributes()),
					Failed:  s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.Parent = fmt.Sprintf("%x", p)
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}

// Named returns the spans named name, in order.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Find returns the only span named name, failing t when there is none or
// more than one.
func Find(t testing.TB, spans []Span, name string) Span {
	t.Helper()
	got := Named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans:\n%s", len(got), name, List(spans))
	}
	return got[0]
}

// ChildOf fails t unless child is in parent's trace and parent is its
// parent.
func ChildOf(t testing.TB, child, parent Span) {
	t.Helper()
	if child.TraceID != parent.TraceID || child.Parent != parent.SpanID {
		t.Fatalf("span %s\nis not a child of %s", child, parent)
	}
}

// List prints spans one a line, for failure messages.
func List(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
}
