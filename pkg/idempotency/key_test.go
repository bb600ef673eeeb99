package idempotency_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/idempotency"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{"12345678", "12345678", true},
		{`"12345678"`, "12345678", true},
		{"with space ok", "with space ok", true},
		{strings.Repeat("a", 255), strings.Repeat("a", 255), true},
		{"1234567", "", false},
		{strings.Repeat("a", 256), "", false},
		{"tab\there!", "", false},
		{"ünïcödé-key", "", false},
		{`"short"`, "", false},
	} {
		got, err := idempotency.ParseKey(tc.raw)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q ok=%v", tc.raw, got, err, tc.want, tc.ok)
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := idempotency.Fingerprint("POST", "/orders", []byte(`{"a":1,"b":[1,2],"c":{"x":1.50}}`))
	same := []string{
		`{"b":[1,2],"a":1,"c":{"x":1.50}}`,
		"  {\n \"c\": {\"x\": 1.50}, \"a\": 1, \"b\": [1, 2]}\n",
	}
	for _, body := range same {
		if fp := idempotency.Fingerprint("POST", "/orders", []byte(body)); fp != base {
			t.Errorf("%s: fingerprint differs from an equivalent body", body)
		}
	}
	differ := map[string]string{
		"value":        idempotency.Fingerprint("POST", "/orders", []byte(`{"a":2,"b":[1,2],"c":{"x":1.50}}`)),
		"number text":  idempotency.Fingerprint("POST", "/orders", []byte(`{"a":1,"b":[1,2],"c":{"x":1.5}}`)),
		"array order":  idempotency.Fingerprint("POST", "/orders", []byte(`{"a":1,"b":[2,1],"c":{"x":1.50}}`)),
		"route":        idempotency.Fingerprint("POST", "/payments", []byte(`{"a":1,"b":[1,2],"c":{"x":1.50}}`)),
		"method":       idempotency.Fingerprint("PUT", "/orders", []byte(`{"a":1,"b":[1,2],"c":{"x":1.50}}`)),
		"non-JSON raw": idempotency.Fingerprint("POST", "/orders", []byte(`{"a":1,"b":[1,2],"c":{"x":1.50}`)),
	}
	for name, fp := range differ {
		if fp == base {
			t.Errorf("%s: fingerprint equal to a different request", name)
		}
	}
	if len(base) != 64 {
		t.Errorf("fingerprint %q is not hex SHA-256", base)
	}
}

func TestDefaultTerminal(t *testing.T) {
	stored := []int{200, 201, 204, 302, 400, 404, 410, 413, 422}
	released := []int{401, 403, 408, 409, 423, 425, 429, 499, 500, 502, 503, 504}
	for _, s := range stored {
		if !idempotency.DefaultTerminal(s) {
			t.Errorf("%d %s should be stored", s, http.StatusText(s))
		}
	}
	for _, s := range released {
		if idempotency.DefaultTerminal(s) {
			t.Errorf("%d %s should release the key", s, http.StatusText(s))
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := idempotency.DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	c := idempotency.DefaultConfig()
	c.Retention = c.LockTTL
	c.ArchiveSchedule = "every now and then"
	c.ArchiveBatch = 0
	err := c.Validate()
	for _, v := range []string{"IDEMPOTENCY_RETENTION", "IDEMPOTENCY_ARCHIVE_SCHEDULE", "IDEMPOTENCY_ARCHIVE_BATCH"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error %v does not name %s", err, v)
		}
	}
}
