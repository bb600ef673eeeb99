package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/httpserver"
)

// TestPprofNeedsTheAdminToken: the profiles show a service's internals and
// cost CPU to take, so they are an operator's endpoint.
func TestPprofNeedsTheAdminToken(t *testing.T) {
	s := newServer(t, nil)
	httpserver.MountPprof(s.Engine(), httpserver.AdminAuth("secret"))

	req := httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil)
	if w := do(t, s.Handler(), req); w.Code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d, want 401", w.Code)
	}
	req = httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil)
	req.Header.Set("Authorization", "Bearer secret")
	w := do(t, s.Handler(), req)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "goroutine profile:") {
		t.Fatalf("with the token: %d %.200q, want 200 and a goroutine profile", w.Code, w.Body.String())
	}
}
