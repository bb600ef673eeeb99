package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// trace is a Jaeger answer: a request whose caller exported nothing (its
// parent is not in the trace), a child started later, and a child started
// first and marked duplicate=true.
const trace = `{"data":[{"traceID":"t1","spans":[
 {"spanID":"b","operationName":"notify payment","references":[{"refType":"CHILD_OF","spanID":"a"}],"startTime":1000300,"duration":100,
  "tags":[{"key":"duplicate","value":false},{"key":"psp.copy","value":0}],"processID":"p2"},
 {"spanID":"a","operationName":"POST /charges","references":[{"refType":"CHILD_OF","spanID":"gone"}],"startTime":1000000,"duration":1000,
  "tags":[{"key":"request_id","value":"r1"}],"processID":"p1"},
 {"spanID":"c","operationName":"POST /payments/callback","references":[{"refType":"CHILD_OF","spanID":"a"}],"startTime":1000200,"duration":50,
  "tags":[{"key":"duplicate","value":true},{"key":"outcome","value":"duplicate"}],"processID":"p1"}
],"processes":{"p1":{"serviceName":"payment"},"p2":{"serviceName":"psp-sim"}}}]}`

func TestDrawsTheTreeInTimeOrder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces/t1" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(trace))
	}))
	defer srv.Close()
	var out strings.Builder
	if err := run([]string{"-jaeger", srv.URL, "-trace", "t1"}, &out); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	charges, callback, notify := strings.Index(html, "POST /charges"), strings.Index(html, "POST /payments/callback"), strings.Index(html, "notify payment")
	if charges < 0 || !(charges < callback && callback < notify) {
		t.Fatalf("rows not root first, then children by start time:\n%s", html)
	}
	if n := strings.Count(html, `<tr class="dup">`); n != 1 {
		t.Fatalf("%d rows shaded as duplicates, want 1:\n%s", n, html)
	}
	for _, want := range []string{"3 spans, 1ms", "request_id=r1", "outcome=duplicate duplicate=true", "padding-left: 18px", "left: 30.00%; width: 10.00%"} {
		if !strings.Contains(html, want) {
			t.Fatalf("page lacks %q:\n%s", want, html)
		}
	}
	if err := run([]string{"-jaeger", srv.URL, "-trace", "nope"}, &out); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("an unknown trace: %v, want the 404", err)
	}
}
