package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

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
