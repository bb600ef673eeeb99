package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/logging"
)

func TestRequestIDAndServiceAreLogged(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "order", logging.Config{Level: "info"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := logging.WithRequestID(context.Background(), "req-42")
	log.With("component", "test").InfoContext(ctx, "hello", "order_no", "A1")
	log.DebugContext(ctx, "hidden at info level")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line (debug filtered), got %d: %s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"msg": "hello", "service": "order", "request_id": "req-42", "component": "test", "order_no": "A1"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %q (record %v)", k, rec[k], want, rec)
		}
	}
	if logging.RequestID(context.Background()) != "" {
		t.Error("a bare context carries a request id")
	}
}

func TestLevelValidation(t *testing.T) {
	for _, ok := range []string{"debug", "INFO", "warn", "error"} {
		if err := (logging.Config{Level: ok}).Validate(); err != nil {
			t.Errorf("level %q: %v", ok, err)
		}
	}
	err := logging.Config{Level: "loud"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Fatalf("level loud: %v, want an error naming LOG_LEVEL", err)
	}
	if _, err := logging.New(&bytes.Buffer{}, "x", logging.Config{Level: "loud"}); err == nil {
		t.Fatal("New accepted an unknown level")
	}
}

// TestTraceIDIsLogged: a record logged in a trace names the trace, so a log
// line leads to its trace; one logged outside a trace has no trace_id.
func TestTraceIDIsLogged(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "order", logging.Config{Level: "info"})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "in a trace")
	log.InfoContext(context.Background(), "in none")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	if err := errors.Join(json.Unmarshal([]byte(lines[0]), &in), json.Unmarshal([]byte(lines[1]), &out)); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace_id = %v in %v, want the span context's", in["trace_id"], in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("a record outside a trace has a trace_id: %v", out)
	}
}
